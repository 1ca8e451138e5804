#include "dataplane/stream.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <random>

using namespace meshloom::dataplane;

TEST(Permutation, IsAPermutationDeterministicAndKeyed) {
  auto p = permutation(7, 0, 0, 1000);
  auto sorted = p;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[i], i);
  EXPECT_EQ(p, permutation(7, 0, 0, 1000));
  EXPECT_NE(p, permutation(7, 0, 1, 1000));
  EXPECT_NE(p, permutation(7, 1, 0, 1000));
  EXPECT_NE(p, permutation(8, 0, 0, 1000));
  // Roughly uniform: the first position takes every value about equally often.
  std::vector<int> first(10, 0);
  for (int e = 0; e < 5000; ++e) first[permutation(1, 0, e, 10)[0]]++;
  for (int c : first) EXPECT_NEAR(c, 500, 100);
}

// Delivers a whole epoch and checks every document's tokens arrive exactly
// once, in order, in pieces no longer than asked.
static void check_one_epoch(int64_t threshold) {
  std::mt19937 rng(3);
  const int64_t docs = 300;
  std::vector<int64_t> lengths(docs);
  for (auto& l : lengths) l = 1 + rng() % (rng() % 7 == 0 ? 5000 : 300);
  LengthFn len = [&](int, int64_t d) { return lengths[d]; };
  SourceStream s(0, 42, docs, threshold);
  std::map<int64_t, int64_t> covered;  // doc -> tokens delivered so far
  int64_t total = std::accumulate(lengths.begin(), lengths.end(), int64_t(0)), got = 0;
  int turn = 0;
  while (got < total) {
    Lane lane = (threshold > 0 && (turn++ % 3 == 0)) ? Lane::long_docs : Lane::short_docs;
    if (!s.available(lane, len))
      lane = lane == Lane::long_docs ? Lane::short_docs : Lane::long_docs;
    ASSERT_TRUE(s.available(lane, len)) << "ran out before delivering the epoch";
    Piece p = s.take(lane, 1 + rng() % 700, len);
    ASSERT_EQ(p.epoch, 0);
    ASSERT_EQ(p.offset, covered[p.doc]) << "piece out of order or repeated";
    if (threshold > 0) {
      ASSERT_EQ(p.long_lane, lengths[p.doc] > threshold);
    }
    covered[p.doc] += p.length;
    ASSERT_LE(covered[p.doc], lengths[p.doc]);
    got += p.length;
  }
  for (int64_t d = 0; d < docs; ++d) EXPECT_EQ(covered[d], lengths[d]) << "doc " << d;
  // The next piece opens epoch 1.
  EXPECT_EQ(s.take(Lane::short_docs, 10, len).epoch, 1);
}

TEST(SourceStream, ExactlyOncePerEpoch) { check_one_epoch(0); }
TEST(SourceStream, ExactlyOncePerEpochWithLongLane) { check_one_epoch(1000); }

TEST(SourceStream, RestoreContinuesIdentically) {
  std::vector<int64_t> lengths(50);
  for (int i = 0; i < 50; ++i) lengths[i] = 1 + (i * 37) % 90;
  LengthFn len = [&](int, int64_t d) { return lengths[d]; };
  SourceStream a(2, 9, 50, 0);
  for (int i = 0; i < 70; ++i) a.take(Lane::short_docs, 33, len);  // crosses into epoch 1
  SourceStream b(2, 9, 50, 0);
  b.restore(a.state());
  for (int i = 0; i < 40; ++i) {
    Piece x = a.take(Lane::short_docs, 21, len), y = b.take(Lane::short_docs, 21, len);
    EXPECT_EQ(x.doc, y.doc);
    EXPECT_EQ(x.offset, y.offset);
    EXPECT_EQ(x.epoch, y.epoch);
  }
}

#include "dataplane/partition.hpp"

TEST(Partition, LoadersFollowWeightTimesCost) {
  // Source 1 is raw text (10x the cost per token) with the same weight.
  auto a = assign_loaders(6, {1, 1, 1}, {1, 10, 1});
  EXPECT_EQ(a.loaders_of_source[0].size(), 1u);
  EXPECT_EQ(a.loaders_of_source[1].size(), 4u);
  EXPECT_EQ(a.loaders_of_source[2].size(), 1u);
  for (const auto& s : a.sources_of_loader) EXPECT_EQ(s.size(), 1u);
  // Fewer loaders than sources: every source served, loads spread.
  auto b = assign_loaders(2, {3, 1, 1, 1}, {1, 1, 1, 1});
  for (const auto& l : b.loaders_of_source) EXPECT_EQ(l.size(), 1u);
  EXPECT_EQ(b.sources_of_loader[0], std::vector<int>{0});
  EXPECT_EQ(b.sources_of_loader[1].size(), 3u);
  EXPECT_EQ(assign_loaders(6, {1, 1, 1}, {1, 10, 1}), a);
}
