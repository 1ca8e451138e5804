#include "wire/protocol.hpp"

#include <concepts>
#include <cstdint>
#include <type_traits>

#include "base/bytes.hpp"
#include "base/check.hpp"
#include "base/strings.hpp"
#include "wire/patch_wire.hpp"

namespace meshloom::wire {

// Samples travel as raw bytes inside vectors: fixed-width fields and no
// padding, whose bytes would travel uninitialised. Segments and token ranges
// have padding: they travel field by field.
static_assert(std::is_trivially_copyable_v<Sample>);
static_assert(std::has_unique_object_representations_v<Sample>);

std::vector<Sample> samples_for(const std::vector<Sample>& all,
                                std::span<const TrainerWork> trainers) {
  for (const auto& t : trainers)
    if (t.trainer == 0) return all;
  std::vector<Sample> mine(all.size());
  for (const auto& t : trainers)
    for (const auto& mb : t.micro)
      for (const auto& seg : mb.segments) mine.at(size_t(seg.sample)) = all.at(size_t(seg.sample));
  return mine;
}

std::vector<Sample> samples_for(const std::vector<Sample>& all, const TrainerWork& work) {
  return samples_for(all, std::span<const TrainerWork>(&work, 1));
}

StepWork work_for(const StepWork& work, const std::function<bool(int32_t trainer)>& keep) {
  StepWork part;
  part.step = work.step;
  part.last = work.last;
  part.global_predictions = work.global_predictions;
  part.capacity = work.capacity;
  part.groups = work.groups;
  part.checkpoint = work.checkpoint;
  part.ckpt_data = work.ckpt_data;
  for (const TrainerWork& t : work.trainers)
    if (keep(t.trainer)) part.trainers.push_back(t);
  part.samples = samples_for(work.samples, part.trainers);
  part.inline_tokens = work.inline_tokens;  // prompts are few: not trimmed
  part.scored_from = work.scored_from;
  for (const StepWork& e : work.eval) part.eval.push_back(work_for(e, keep));
  return part;
}

namespace {

// Each message's wire layout is written once, as a function `layout(io, m)`
// over its fields; `io` is an Encoder (reads the fields into bytes) or a
// Decoder (fills them from bytes, checking each count against the bytes left).
// Fixed-width fields, vectors of them and strings take io(field); the few
// fields with rules of their own take a named call.

// Fields in order, each taken by io(field).
template <class IO, class... F>
void fields(IO& io, F&... f) {
  (io(f), ...);
}

// A segment's fields, for an Encoder or a Decoder: 20 bytes.
template <class IO, class S>
void segment_fields(IO& io, S& s) {
  fields(io, s.sample, s.begin, s.length);
}

class Encoder {
 public:
  template <class T>
  void operator()(const T& v) {
    w_.put(v);
  }
  void operator()(bool v) { w_.put(uint8_t(v)); }
  template <class T>
  void operator()(const std::vector<T>& v) {
    w_.put_vector(v);
  }
  void operator()(const std::string& s) { w_.put_string(s); }
  // A list of structs, each written by `each`.
  template <class T, class Each>
  void list(const std::vector<T>& v, size_t /*min_bytes*/, Each each) {
    w_.put(uint64_t(v.size()));
    for (const T& x : v) each(x);
  }
  void segments(const std::vector<Segment>& v, size_t /*samples*/) {
    list(v, 20, [&](const Segment& s) { segment_fields(*this, s); });
  }
  void patches(const std::vector<float>& v) { put_patches(w_, v); }
  // Sample lists travel sparse: their size, then the index and value of each
  // sample present (length > 0; a trimmed list's others are default).
  void samples(const std::vector<Sample>& samples) {
    std::vector<int32_t> index;
    std::vector<Sample> present;
    for (size_t i = 0; i < samples.size(); ++i)
      if (samples[i].length > 0) {
        index.push_back(int32_t(i));
        present.push_back(samples[i]);
      }
    ML_CHECK(samples.size() <= kMaxSamples,
             strf("a step of %zu samples (a message holds at most %llu)", samples.size(),
                  (unsigned long long)kMaxSamples));
    w_.put(uint64_t(samples.size()));
    w_.put_vector(index);
    w_.put_vector(present);
  }
  std::string take() { return std::move(w_.bytes()); }

 private:
  ByteWriter w_;
};

class Decoder {
 public:
  Decoder(const std::string& bytes, const char* what, int from) : r_(bytes, what, from) {}
  template <class T>
  void operator()(T& v) {
    v = r_.get<T>();
  }
  void operator()(bool& v) { v = r_.get<uint8_t>() != 0; }
  template <class T>
  void operator()(std::vector<T>& v) {
    v = r_.get_vector<T>();
  }
  void operator()(std::string& s) { s = r_.get_string(); }
  // `min_bytes`: the least one item takes on the wire, so that a count the
  // rest of the bytes cannot hold fails before anything is allocated.
  template <class T, class Each>
  void list(std::vector<T>& v, size_t min_bytes, Each each) {
    v.resize(r_.get_count(min_bytes));
    for (T& x : v) each(x);
  }
  // Every segment names a sample of the message's list.
  void segments(std::vector<Segment>& v, size_t samples) {
    list(v, 20, [&](Segment& s) { segment_fields(*this, s); });
    for (const Segment& s : v)
      if (s.sample < 0 || size_t(s.sample) >= samples)
        r_.fail_corrupt("a segment of sample " + std::to_string(s.sample) + " outside a list of " +
                        std::to_string(samples));
  }
  void patches(std::vector<float>& v) { v = get_patches(r_); }
  void samples(std::vector<Sample>& samples) {
    const uint64_t n = r_.get<uint64_t>();
    if (n > kMaxSamples)
      r_.fail_corrupt("a sample list of " + std::to_string(n) + " samples (at most " +
                      std::to_string(kMaxSamples) + ")");
    const std::vector<int32_t> index = r_.get_vector<int32_t>();
    const std::vector<Sample> present = r_.get_vector<Sample>();
    if (index.size() != present.size() || index.size() > n)
      r_.fail_corrupt("a sample list of " + std::to_string(n) + " samples with " +
                      std::to_string(index.size()) + " indices and " +
                      std::to_string(present.size()) + " samples present");
    samples.assign(n, Sample{});
    for (size_t k = 0; k < index.size(); ++k) {
      if (index[k] < 0 || uint64_t(index[k]) >= n)
        r_.fail_corrupt("sample index " + std::to_string(index[k]) + " outside a list of " +
                        std::to_string(n));
      samples[size_t(index[k])] = present[k];
    }
  }
  // The whole message is read: bytes left over mean sender and receiver disagree.
  void finish() const {
    if (!r_.done()) r_.fail_corrupt("bytes left over after the message");
  }

 private:
  ByteReader r_;
};

// `M` is the message type, const when encoding.
template <class M, class Message>
concept Is = std::same_as<std::remove_const_t<M>, Message>;

template <class IO, Is<Assign> M>
void layout(IO& io, M& m) {
  fields(io, m.sources, m.shadow_sources, m.shadow);
}

template <class IO, Is<LengthRequest> M>
void layout(IO& io, M& m) {
  fields(io, m.step, m.source, m.docs);
}

template <class IO, Is<LengthReply> M>
void layout(IO& io, M& m) {
  fields(io, m.source, m.docs, m.lengths, m.images, m.seconds_per_token);
}

template <class IO, Is<TokenRequest> M>
void layout(IO& io, M& m) {
  io(m.step);
  io.list(m.ranges, 28, [&](auto& r) { fields(io, r.source, r.doc, r.offset, r.length); });
}

// What the step work and the batches made from it share: the step, its
// sample list, and whether trainers checkpoint after it.
template <class IO, class M>
void step_head(IO& io, M& m) {
  fields(io, m.step, m.last, m.global_predictions, m.capacity);
  io.samples(m.samples);
  io.list(m.groups, 8, [&](auto& g) { io(g); });  // a group: at least a count and a member
}
template <class IO, class M>
void step_tail(IO& io, M& m) {
  fields(io, m.checkpoint, m.ckpt_data);
}
// A micro-batch's CP ring and pipeline fields, last in both messages.
template <class IO, class MB>
void micro_tail(IO& io, MB& mb) {
  fields(io, mb.group, mb.member, mb.offload, mb.slot, mb.ulysses);
}

// A step's work or batch without its held-out part, which holds parts like
// it (but no part of its own: nothing nests deeper).
template <class IO, Is<StepWork> M>
void step_part(IO& io, M& m);
template <class IO, Is<Batch> M>
void step_part(IO& io, M& m);

template <class IO, class M>
void layout(IO& io, M& m) requires Is<M, StepWork> || Is<M, Batch> {
  step_part(io, m);
  io.list(m.eval, 48, [&](auto& e) { step_part(io, e); });
}

template <class IO, Is<StepWork> M>
void step_part(IO& io, M& m) {
  step_head(io, m);
  // A trainer takes at least 12 bytes (its index, its micro-batch count), a
  // micro-batch at least 32 (two counts, member, offload, slot, ulysses).
  io.list(m.trainers, 12, [&](auto& t) {
    io(t.trainer);
    io.list(t.micro, 32, [&](auto& mb) {
      io.segments(mb.segments, m.samples.size());
      micro_tail(io, mb);
    });
  });
  step_tail(io, m);
  io.list(m.inline_tokens, 8, [&](auto& t) { io(t); });
  io(m.scored_from);
}

template <class IO, Is<Batch> M>
void step_part(IO& io, M& m) {
  step_head(io, m);
  // A micro-batch takes at least 64 bytes (six counts, member, offload,
  // slot, ulysses).
  io.list(m.micro, 64, [&](auto& mb) {
    fields(io, mb.tokens, mb.targets, mb.positions);
    io.segments(mb.segments, m.samples.size());
    io.patches(mb.patches);
    micro_tail(io, mb);
  });
  step_tail(io, m);
  io(m.scored_from);
}

template <class IO, Is<Report> M>
void layout(IO& io, M& m) {
  fields(io, m.rank, m.role, m.peak_rss_kib, m.pss_kib, m.worker_pss_kib, m.busy_seconds, m.tokens,
         m.faults_fired, m.decodes, m.decoded_docs, m.decodes_at_read, m.decode_seconds, m.replies,
         m.reply_bytes, m.checkpoints, m.checkpoint_bytes, m.checkpoint_stall_seconds,
         m.checkpoint_save_seconds, m.peak_rss_before_checkpoints_kib);
}

template <class IO, Is<Ack> M>
void layout(IO& io, M& m) {
  fields(io, m.step, m.trainer, m.loss_sum, m.predictions, m.tokens, m.flops, m.step_seconds,
         m.wait_seconds, m.compute_seconds, m.grad_norm, m.peak_flops, m.echo, m.note, m.micro,
         m.group_hits, m.group_misses, m.group_split_seconds, m.group_device_bytes,
         m.group_device_evictions, m.source_loss, m.source_predictions);
  auto& e = m.eval;
  fields(io, e.batches, e.tokens, e.predictions, e.loss_sum, e.flops, e.seconds, e.source_loss,
         e.source_predictions, e.position_loss, e.position_predictions, e.sample_scores);
}

template <class M>
std::string encode_message(const M& m) {
  Encoder e;
  layout(e, m);
  return e.take();
}

template <class M>
M decode_message(const std::string& bytes, const char* what, int from) {
  Decoder d(bytes, what, from);
  M m;
  layout(d, m);
  d.finish();
  return m;
}

}  // namespace

// Each message's pair of public entry points; `what` names it in errors.
#define ML_WIRE_CODEC(M, decode_name, what)                    \
  std::string encode(const M& m) { return encode_message(m); } \
  M decode_name(const std::string& b, int from) { return decode_message<M>(b, what, from); }
ML_WIRE_CODEC(Assign, decode_assign, "loader assignment")
ML_WIRE_CODEC(LengthRequest, decode_length_request, "length request")
ML_WIRE_CODEC(LengthReply, decode_length_reply, "length reply")
ML_WIRE_CODEC(TokenRequest, decode_token_request, "token request")
ML_WIRE_CODEC(StepWork, decode_step_work, "step work")
ML_WIRE_CODEC(Batch, decode_batch, "trainer batch")
ML_WIRE_CODEC(Report, decode_report, "report")
ML_WIRE_CODEC(Ack, decode_ack, "trainer ack")
#undef ML_WIRE_CODEC

}  // namespace meshloom::wire
