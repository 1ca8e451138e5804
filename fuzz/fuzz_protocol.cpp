// The decoders of the messages between ranks (lib/wire/protocol): byte 0
// picks the message type, byte 1 the peer rank it came from, the rest is the
// message as MPI delivered it.
//
// Checks: a truncated or corrupt message is one Error naming the message and
// the peer rank, never a crash or an allocation its bytes cannot justify (a
// count of 2^60 fails before allocating); a message that decodes encodes to
// bytes that decode and encode the same again.
#include <cstring>
#include <string>

#include "base/bytes.hpp"
#include "base/strings.hpp"
#include "fuzz/harness.hpp"
#include "wire/patch_wire.hpp"
#include "wire/protocol.hpp"

using namespace meshloom;

namespace {

template <class Decode>
void round_trip(const std::string& msg, int from, Decode decode) {
  const auto m = decode(msg, from);
  const std::string once = wire::encode(m);
  const std::string twice = wire::encode(decode(once, from));
  if (once != twice)
    fuzz::finding("encode(decode(encode(decode(m)))) differs from encode(decode(m))");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::init();
  if (size < 2) return 0;
  const int kind = data[0] % 9;
  const int from = data[1];
  const std::string msg(reinterpret_cast<const char*>(data) + 2, size - 2);
  const std::string rank = strf("rank %d", from);
  try {
    switch (kind) {
      case 0:
        round_trip(msg, from, wire::decode_assign);
        break;
      case 1:
        round_trip(msg, from, wire::decode_length_request);
        break;
      case 2:
        round_trip(msg, from, wire::decode_length_reply);
        break;
      case 3:
        round_trip(msg, from, wire::decode_token_request);
        break;
      case 4: {
        round_trip(msg, from, wire::decode_step_work);
        // What a constructor does with step work: each trainer's samples. Each
        // call is O(samples) by design (a trimmed list keeps the manifest's
        // indices), so a few trainers are enough to check them.
        const wire::StepWork w = wire::decode_step_work(msg, from);
        for (size_t k = 0; k < w.trainers.size() && k < 4; ++k)
          (void)wire::samples_for(w.samples, w.trainers[k]);
        (void)wire::samples_for(w.samples, w.trainers);
        break;
      }
      case 5:
        round_trip(msg, from, wire::decode_batch);
        break;
      case 6: {  // a plain struct: its padding bytes need not survive, its fields must
        const wire::Report a = wire::decode_report(msg, from);
        const wire::Report b = wire::decode_report(wire::encode(a), from);
        if (a.rank != b.rank || a.role != b.role || a.peak_rss_kib != b.peak_rss_kib ||
            a.tokens != b.tokens || a.faults_fired != b.faults_fired)
          fuzz::finding("a report does not survive encode(decode(m))");
        break;
      }
      case 7: {
        round_trip(msg, from, wire::decode_ack);
        // The lead decodes an ack's echo as a batch (data runs).
        const wire::Ack a = wire::decode_ack(msg, from);
        if (!a.echo.empty()) (void)wire::decode_batch(a.echo, from);
        break;
      }
      case 8: {  // a token reply, read where the constructor receives it
        ByteReader r(msg, "token reply", from);
        (void)r.get_vector<int32_t>();
        const std::vector<float> patches = wire::get_patches(r);
        ByteWriter w;  // decoding gives what was encoded, bit for bit
        wire::put_patches(w, patches);
        ByteReader again(w.bytes(), "token reply", from);
        const std::vector<float> back = wire::get_patches(again);
        if (back.size() != patches.size() ||
            (!back.empty() &&
             std::memcmp(back.data(), patches.data(), back.size() * sizeof(float)) != 0))
          fuzz::finding("patches do not survive encode(decode(m))");
        break;
      }
    }
  } catch (const Error& e) {
    fuzz::expect_names(e, {rank});
  }
  return 0;
}
