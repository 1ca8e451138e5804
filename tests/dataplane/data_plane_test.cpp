#include "dataplane/data_plane.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

using namespace meshloom;
using namespace meshloom::dataplane;

namespace {

// Three sources of different shapes: short, medium, and long-tailed documents.
struct Corpus {
  std::vector<std::vector<int64_t>> lengths;
  Corpus() {
    std::mt19937 rng(11);
    lengths.resize(3);
    for (int i = 0; i < 4000; ++i) lengths[0].push_back(1 + rng() % 200);
    for (int i = 0; i < 1500; ++i) lengths[1].push_back(100 + rng() % 2000);
    for (int i = 0; i < 600; ++i)
      lengths[2].push_back(rng() % 10 == 0 ? 5000 + rng() % 40000 : 50 + rng() % 3000);
  }
  std::vector<int64_t> docs() const {
    return {int64_t(lengths[0].size()), int64_t(lengths[1].size()), int64_t(lengths[2].size())};
  }
  LengthFn fn() const {
    return [this](int s, int64_t d) { return lengths[s][d]; };
  }
};

config::Config make_config(const std::string& extra) {
  return config::parse_config(
      "data:\n  seq_len: 4096\n  tokens_per_step: 32768\n  sources:\n"
      "    - {name: a, path: x, weight: 1}\n    - {name: b, path: y, weight: 2}\n"
      "    - {name: c, path: z, weight: 1}\n" +
          extra,
      "test.yaml");
}

}  // namespace

TEST(DataPlane, FillsTheBudgetExactlyWithBoundedPieces) {
  Corpus corpus;
  config::Config c = make_config("");
  DataPlane plane(c, corpus.docs(), corpus.fn());
  for (int s = 0; s < 30; ++s) {
    StepManifest m = plane.next();
    EXPECT_EQ(m.step, s);
    EXPECT_EQ(m.tokens(), c.data.tokens_per_step);
    for (const auto& p : m.samples) {
      EXPECT_GT(p.length, 0);
      EXPECT_LE(p.length, c.data.seq_len);
    }
  }
}

TEST(DataPlane, SharesTrackTheCurriculumWithinTwoPoints) {
  Corpus corpus;
  config::Config c = make_config(
      "  schedule:\n    - {step: 0, weights: {a: 6, b: 3, c: 1}}\n"
      "    - {step: 100, weights: {a: 1, b: 1, c: 2}}\n"
      "    - {step: 150, weights: {a: 0, b: 1, c: 3}}\n");
  DataPlane plane(c, corpus.docs(), corpus.fn());
  MixtureSchedule schedule(c.data);
  std::vector<double> expected(3, 0), got(3, 0);
  double total = 0;
  for (int s = 0; s < 200; ++s) {
    auto w = schedule.weights(s);
    StepManifest m = plane.next();
    for (int i = 0; i < 3; ++i) expected[i] += w[i] * double(m.tokens());
    for (const auto& p : m.samples) got[p.source] += double(p.length);
    total += double(m.tokens());
    if (s == 49 || s == 124 || s == 199) {  // also within each stretch of the curriculum
      for (int i = 0; i < 3; ++i)
        EXPECT_NEAR(got[i] / total, expected[i] / total, 0.02) << "source " << i << " step " << s;
    }
  }
  // Weight 0 from step 150 on: source a gets nothing beyond its earlier deficit.
  EXPECT_NEAR(schedule.weights(170)[0], 0.0, 1e-12);
}

// Per source, the pieces delivered must be exactly the stream's own order:
// nothing skipped, nothing repeated, whatever the mixture did.
static void check_streams_contiguous(const std::vector<StepManifest>& steps, const Corpus& corpus,
                                     uint64_t seed) {
  std::map<int, std::vector<Piece>> per_source;
  for (const auto& m : steps)
    for (const auto& p : m.samples) per_source[p.source].push_back(p);
  for (auto& [source, pieces] : per_source) {
    int64_t epoch = 0, pos = 0, offset = 0;
    auto order = permutation(seed, source, 0, int64_t(corpus.lengths[source].size()));
    for (const auto& p : pieces) {
      if (pos == int64_t(order.size())) {
        ++epoch;
        pos = 0;
        order = permutation(seed, source, epoch, int64_t(order.size()));
      }
      ASSERT_EQ(p.epoch, epoch);
      ASSERT_EQ(p.doc, order[pos]) << "source " << source << " skipped or repeated a document";
      ASSERT_EQ(p.offset, offset);
      offset += p.length;
      if (offset == corpus.lengths[source][p.doc]) {
        ++pos;
        offset = 0;
      }
    }
  }
}

TEST(DataPlane, ChangingWeightsMidRunNeitherLosesNorRepeats) {
  Corpus corpus;
  config::Config before = make_config("");
  config::Config after = make_config("  schedule:\n    - {step: 0, weights: {a: 1, c: 5}}\n");
  std::vector<StepManifest> steps;
  DataPlane first(before, corpus.docs(), corpus.fn());
  for (int s = 0; s < 60; ++s) steps.push_back(first.next());
  // A restart with new weights, from the saved (serialized) state.
  DataPlane second(after, corpus.docs(), corpus.fn());
  second.restore(deserialize_state(serialize(first.state())));
  for (int s = 0; s < 140; ++s) steps.push_back(second.next());
  EXPECT_EQ(steps.back().step, 199);
  check_streams_contiguous(steps, corpus, 1234);
}

TEST(DataPlane, RestoredStateContinuesBitIdentically) {
  Corpus corpus;
  config::Config c = make_config("  long_policy: {threshold: 4096, share: 0.3}\n");
  DataPlane a(c, corpus.docs(), corpus.fn());
  for (int s = 0; s < 25; ++s) a.next();
  DataPlane b(c, corpus.docs(), corpus.fn());
  b.restore(deserialize_state(serialize(a.state())));
  for (int s = 0; s < 25; ++s) {
    StepManifest x = a.next(), y = b.next();
    ASSERT_EQ(x.samples.size(), y.samples.size());
    for (size_t i = 0; i < x.samples.size(); ++i) {
      EXPECT_EQ(x.samples[i].doc, y.samples[i].doc);
      EXPECT_EQ(x.samples[i].offset, y.samples[i].offset);
      EXPECT_EQ(x.samples[i].length, y.samples[i].length);
    }
  }
}

TEST(DataPlane, LongPolicyReachesItsShare) {
  Corpus corpus;
  config::Config c = make_config("  long_policy: {threshold: 4096, share: 0.25}\n");
  DataPlane plane(c, corpus.docs(), corpus.fn());
  double long_tokens = 0, total = 0;
  std::vector<StepManifest> steps;
  for (int s = 0; s < 100; ++s) {
    steps.push_back(plane.next());
    for (const auto& p : steps.back().samples) {
      if (p.long_lane) long_tokens += double(p.length);
      EXPECT_EQ(p.long_lane, corpus.lengths[p.source][p.doc] > 4096);
    }
    total += double(steps.back().tokens());
  }
  EXPECT_NEAR(long_tokens / total, 0.25, 0.02);
  EXPECT_FALSE(plane.long_lane_empty());
}

// A threshold above every document: the share cannot be met, and the plane
// says so (the lead warns) instead of silently delivering no long token.
TEST(DataPlane, LongPolicyNoDocumentMeetsIsFlagged) {
  Corpus corpus;
  config::Config c = make_config("  long_policy: {threshold: 100000, share: 0.5}\n");
  DataPlane plane(c, corpus.docs(), corpus.fn());
  EXPECT_FALSE(plane.long_lane_empty());
  for (const auto& p : plane.next().samples) EXPECT_FALSE(p.long_lane);
  EXPECT_TRUE(plane.long_lane_empty());
}

TEST(DataPlane, CorruptStateIsRefused) {
  Corpus corpus;
  DataPlane plane(make_config(""), corpus.docs(), corpus.fn());
  std::string bytes = serialize(plane.state());
  EXPECT_THROW(deserialize_state(bytes.substr(0, bytes.size() - 3)), Error);
  bytes[0] ^= 1;
  EXPECT_THROW(deserialize_state(bytes), Error);
}
