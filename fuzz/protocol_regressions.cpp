// Writes fuzz/regressions/protocol/* against today's wire layout: each input
// is a message encoded by lib/wire/protocol, then corrupted where its finding
// was. A count is found, not assumed: it is the first byte where two messages
// that differ only in that list's size differ, so a new field before it moves
// the corruption along. fuzz/regressions/protocol.checks names the check each
// one reaches; ctest (fuzz.regression.protocol.*) proves it does.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "base/bytes.hpp"
#include "base/check.hpp"
#include "wire/patch_wire.hpp"
#include "wire/protocol.hpp"

using namespace meshloom;
namespace fs = std::filesystem;

namespace {

// Kind bytes of fuzz_protocol.cpp's switch.
enum Kind { kLengthRequest = 1, kStepWork = 4, kBatch = 5, kTokenReply = 8 };

// Every regression comes from peer rank 9, the rank its error must name.
void put(const fs::path& dir, const char* name, Kind kind, const std::string& msg) {
  std::ofstream(dir / name, std::ios::binary) << std::string(1, char(kind)) << char(9) << msg;
}

// Where a and b first differ: the count of the one list they differ in.
size_t count_at(const std::string& a, const std::string& b) {
  const auto [ia, ib] = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
  ML_CHECK(ia != a.end() && ib != b.end(), "the two messages do not differ");
  return size_t(ia - a.begin());
}

// `a` with the 8-byte count at `at` set to n.
std::string with_count(std::string a, size_t at, uint64_t n) {
  ML_CHECK(at + sizeof n <= a.size(), "a count past the message's end");
  std::memcpy(a.data() + at, &n, sizeof n);
  return a;
}

// a and b differ only in the one list's size; a with that count set to n.
std::string count_set(const std::string& a, const std::string& b, uint64_t n) {
  return with_count(a, count_at(a, b), n);
}

constexpr uint64_t k2e60 = uint64_t(1) << 60;

wire::TrainerWork trainer(int32_t t, int32_t sample) {
  wire::MicroBatchWork mb;
  mb.segments = {{sample, 0, 10}};
  mb.group = {t};
  return {t, {mb}};
}

void step_work_regressions(const fs::path& dir) {
  wire::StepWork one, two;
  one.step = two.step = 7;
  one.samples = two.samples = {{0, 4, 0, 3, 0, 10}};
  one.trainers = {trainer(0, 0)};
  two.trainers = {trainer(0, 0), trainer(1, 0)};
  put(dir, "step-work-2e60-trainers", kStepWork,
      count_set(wire::encode(one), wire::encode(two), k2e60));

  // Many trainers and more samples than a message may hold (each trainer's
  // samples_for once copied the whole list).
  wire::StepWork many = one, more;
  many.trainers.clear();
  for (int32_t t = 0; t < 64; ++t) many.trainers.push_back(trainer(t, 0));
  more = many;
  more.samples.push_back({});  // a default sample: not present, only counted
  put(dir, "step-work-4m-samples-many-trainers-slow", kStepWork,
      count_set(wire::encode(many), wire::encode(more), 3224608));

  wire::StepWork outside = one;
  outside.trainers = {trainer(0, 5)};  // the encoder does not check segments
  put(dir, "step-work-segment-outside-samples", kStepWork, wire::encode(outside));

  // A step's held-out parts (StepWork::eval), and an evaluation part's
  // inline prompts (StepWork::inline_tokens): counts no message can hold.
  wire::StepWork with_eval = one;
  with_eval.eval = {one};
  put(dir, "step-work-2e60-eval-parts", kStepWork,
      count_set(wire::encode(one), wire::encode(with_eval), k2e60));
  wire::StepWork prompt = one, prompts = one;
  prompt.inline_tokens = {{1, 2, 3}};
  prompts.inline_tokens = {{1, 2, 3}, {4}};
  put(dir, "step-work-2e60-inline-prompts", kStepWork,
      count_set(wire::encode(prompt), wire::encode(prompts), k2e60));
}

void batch_regressions(const fs::path& dir) {
  wire::Batch one, two;
  one.step = two.step = 7;
  one.micro = {wire::MicroBatch{}};
  two.micro = {wire::MicroBatch{}, wire::MicroBatch{}};
  put(dir, "batch-2e60-micro-batches", kBatch,
      count_set(wire::encode(one), wire::encode(two), k2e60));

  wire::Batch s1 = one, s2 = one;
  s1.samples.resize(1);  // default samples: counted, none present
  s2.samples.resize(2);
  put(dir, "batch-2e31-samples", kBatch,
      count_set(wire::encode(s1), wire::encode(s2), (uint64_t(1) << 31) - 1));
}

// A token reply as a loader sends it: the tokens, then their patches.
std::string token_reply(const std::vector<int32_t>& tokens) {
  ByteWriter w;
  w.put_vector(tokens);
  wire::put_patches(w, {});
  return w.bytes();
}

}  // namespace

void write_protocol_regressions(const fs::path& dir) {
  const wire::LengthRequest one{7, 1, {3}}, two{7, 1, {3, 9}};
  put(dir, "length-request-2e60-docs", kLengthRequest,
      count_set(wire::encode(one), wire::encode(two), k2e60));
  step_work_regressions(dir);
  batch_regressions(dir);
  // Three tokens announced, two sent.
  put(dir, "token-reply-truncated", kTokenReply,
      token_reply({464, 2068, 7586}).substr(0, sizeof(uint64_t) + 2 * sizeof(int32_t)));
  put(dir, "empty-patches-token-reply", kTokenReply, token_reply({464, 2068, 7586, 21831}));
}
