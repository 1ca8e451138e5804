#include "roles/protocol.hpp"

#include <cstdint>

#include "base/bytes.hpp"
#include "base/check.hpp"
#include "base/strings.hpp"

namespace meshloom::proto {

// Plain structs of fixed-width fields travel as raw bytes inside vectors.
static_assert(std::is_trivially_copyable_v<TokenRange>);
static_assert(std::is_trivially_copyable_v<Sample>);
static_assert(std::is_trivially_copyable_v<Segment>);

// Every segment names a sample of the message's list.
static void check_segments(const ByteReader& r, const std::vector<Segment>& segments,
                           size_t samples) {
  for (const Segment& s : segments)
    if (s.sample < 0 || size_t(s.sample) >= samples)
      r.fail_corrupt("a segment of sample " + std::to_string(s.sample) + " outside a list of " +
                     std::to_string(samples));
}

// The whole message is read: bytes left over mean sender and receiver disagree.
static void finish(const ByteReader& r) {
  if (!r.done()) r.fail_corrupt("bytes left over after the message");
}

std::string encode(const Assign& m) {
  ByteWriter w;
  w.put_vector(m.sources);
  w.put_vector(m.shadow_sources);
  w.put(m.shadow);
  return std::move(w.bytes());
}
Assign decode_assign(const std::string& b, int from) {
  ByteReader r(b, "loader assignment", from);
  Assign m;
  m.sources = r.get_vector<int32_t>();
  m.shadow_sources = r.get_vector<int32_t>();
  m.shadow = r.get<int32_t>();
  finish(r);
  return m;
}

std::string encode(const LengthRequest& m) {
  ByteWriter w;
  w.put(m.step);
  w.put(m.source);
  w.put_vector(m.docs);
  return std::move(w.bytes());
}
LengthRequest decode_length_request(const std::string& b, int from) {
  ByteReader r(b, "length request", from);
  LengthRequest m;
  m.step = r.get<int64_t>();
  m.source = r.get<int32_t>();
  m.docs = r.get_vector<int64_t>();
  finish(r);
  return m;
}

std::string encode(const LengthReply& m) {
  ByteWriter w;
  w.put(m.source);
  w.put_vector(m.docs);
  w.put_vector(m.lengths);
  w.put(m.seconds_per_token);
  return std::move(w.bytes());
}
LengthReply decode_length_reply(const std::string& b, int from) {
  ByteReader r(b, "length reply", from);
  LengthReply m;
  m.source = r.get<int32_t>();
  m.docs = r.get_vector<int64_t>();
  m.lengths = r.get_vector<int64_t>();
  m.seconds_per_token = r.get<double>();
  finish(r);
  return m;
}

std::string encode(const TokenRequest& m) {
  ByteWriter w;
  w.put(m.step);
  w.put_vector(m.ranges);
  return std::move(w.bytes());
}
TokenRequest decode_token_request(const std::string& b, int from) {
  ByteReader r(b, "token request", from);
  TokenRequest m;
  m.step = r.get<int64_t>();
  m.ranges = r.get_vector<TokenRange>();
  finish(r);
  return m;
}

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

// Sample lists travel sparse: their size, then the index and value of each
// sample present (length > 0; a trimmed list's others are default).
static void put_samples(ByteWriter* w, const std::vector<Sample>& samples) {
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
  w->put(uint64_t(samples.size()));
  w->put_vector(index);
  w->put_vector(present);
}
static std::vector<Sample> get_samples(ByteReader* r) {
  const uint64_t n = r->get<uint64_t>();
  if (n > kMaxSamples)
    r->fail_corrupt("a sample list of " + std::to_string(n) + " samples (at most " +
                    std::to_string(kMaxSamples) + ")");
  const std::vector<int32_t> index = r->get_vector<int32_t>();
  const std::vector<Sample> present = r->get_vector<Sample>();
  if (index.size() != present.size() || index.size() > n)
    r->fail_corrupt("a sample list of " + std::to_string(n) + " samples with " +
                    std::to_string(index.size()) + " indices and " +
                    std::to_string(present.size()) + " samples present");
  std::vector<Sample> samples(n);
  for (size_t k = 0; k < index.size(); ++k) {
    if (index[k] < 0 || uint64_t(index[k]) >= n)
      r->fail_corrupt("sample index " + std::to_string(index[k]) + " outside a list of " +
                      std::to_string(n));
    samples[size_t(index[k])] = present[k];
  }
  return samples;
}

static void put_micro(ByteWriter* w, const std::vector<MicroBatchWork>& micro) {
  w->put(uint64_t(micro.size()));
  for (const auto& mb : micro) {
    w->put_vector(mb.segments);
    w->put_vector(mb.group);
    w->put(mb.member);
    w->put(mb.offload);
  }
}

std::string encode(const StepWork& m) {
  ByteWriter w;
  w.put(m.step);
  w.put(uint8_t(m.last));
  w.put(m.global_predictions);
  put_samples(&w, m.samples);
  w.put(uint64_t(m.trainers.size()));
  for (const auto& t : m.trainers) {
    w.put(t.trainer);
    put_micro(&w, t.micro);
  }
  w.put(uint8_t(m.checkpoint));
  w.put_string(m.ckpt_data);
  return std::move(w.bytes());
}
StepWork decode_step_work(const std::string& b, int from) {
  ByteReader r(b, "step work", from);
  StepWork m;
  m.step = r.get<int64_t>();
  m.last = r.get<uint8_t>() != 0;
  m.global_predictions = r.get<int64_t>();
  m.samples = get_samples(&r);
  // Each trainer takes at least 12 bytes (its index, its micro-batch count),
  // each micro-batch at least 24 (two counts, member, offload).
  m.trainers.resize(r.get_count(12));
  for (auto& t : m.trainers) {
    t.trainer = r.get<int32_t>();
    t.micro.resize(r.get_count(24));
    for (auto& mb : t.micro) {
      mb.segments = r.get_vector<Segment>();
      check_segments(r, mb.segments, m.samples.size());
      mb.group = r.get_vector<int32_t>();
      mb.member = r.get<int32_t>();
      mb.offload = r.get<float>();
    }
  }
  m.checkpoint = r.get<uint8_t>() != 0;
  m.ckpt_data = r.get_string();
  finish(r);
  return m;
}

std::string encode(const Batch& m) {
  ByteWriter w;
  w.put(m.step);
  w.put(uint8_t(m.last));
  w.put(m.global_predictions);
  put_samples(&w, m.samples);
  w.put(uint64_t(m.micro.size()));
  for (const auto& mb : m.micro) {
    w.put_vector(mb.tokens);
    w.put_vector(mb.targets);
    w.put_vector(mb.positions);
    w.put_vector(mb.segments);
    w.put_vector(mb.group);
    w.put(mb.member);
    w.put(mb.offload);
  }
  w.put(uint8_t(m.checkpoint));
  w.put_string(m.ckpt_data);
  return std::move(w.bytes());
}
Batch decode_batch(const std::string& b, int from) {
  ByteReader r(b, "trainer batch", from);
  Batch m;
  m.step = r.get<int64_t>();
  m.last = r.get<uint8_t>() != 0;
  m.global_predictions = r.get<int64_t>();
  m.samples = get_samples(&r);
  // Each micro-batch takes at least 48 bytes (five counts, member, offload).
  m.micro.resize(r.get_count(48));
  for (auto& mb : m.micro) {
    mb.tokens = r.get_vector<int32_t>();
    mb.targets = r.get_vector<int32_t>();
    mb.positions = r.get_vector<int32_t>();
    mb.segments = r.get_vector<Segment>();
    check_segments(r, mb.segments, m.samples.size());
    mb.group = r.get_vector<int32_t>();
    mb.member = r.get<int32_t>();
    mb.offload = r.get<float>();
  }
  m.checkpoint = r.get<uint8_t>() != 0;
  m.ckpt_data = r.get_string();
  finish(r);
  return m;
}

std::string encode(const Report& m) {
  ByteWriter w;
  w.put(m);
  return std::move(w.bytes());
}
Report decode_report(const std::string& b, int from) {
  ByteReader r(b, "report", from);
  const Report m = r.get<Report>();
  finish(r);
  return m;
}

std::string encode(const Ack& m) {
  ByteWriter w;
  w.put(m.step);
  w.put(m.trainer);
  w.put(m.loss_sum);
  w.put(m.predictions);
  w.put(m.tokens);
  w.put(m.flops);
  w.put(m.step_seconds);
  w.put(m.wait_seconds);
  w.put(m.compute_seconds);
  w.put(m.grad_norm);
  w.put(m.peak_flops);
  w.put_string(m.echo);
  w.put_string(m.note);
  w.put_vector(m.micro);
  return std::move(w.bytes());
}
Ack decode_ack(const std::string& b, int from) {
  ByteReader r(b, "trainer ack", from);
  Ack m;
  m.step = r.get<int64_t>();
  m.trainer = r.get<int32_t>();
  m.loss_sum = r.get<double>();
  m.predictions = r.get<int64_t>();
  m.tokens = r.get<int64_t>();
  m.flops = r.get<double>();
  m.step_seconds = r.get<double>();
  m.wait_seconds = r.get<double>();
  m.compute_seconds = r.get<double>();
  m.grad_norm = r.get<double>();
  m.peak_flops = r.get<double>();
  m.echo = r.get_string();
  m.note = r.get_string();
  m.micro = r.get_vector<double>();
  finish(r);
  return m;
}

}  // namespace meshloom::proto
