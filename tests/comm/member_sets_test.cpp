// The pure bookkeeping of the group communicator cache (no GPU): member-set
// keys, split rounds and colours, ring neighbours and the LRU plan.
#include "comm/member_sets.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "base/check.hpp"

namespace meshloom::comm {
namespace {

struct ThrowOnFail : ::testing::Environment {
  void SetUp() override { set_fatal_handler(throwing_fatal_handler); }
};
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new ThrowOnFail);

using Sets = std::vector<MemberSet>;

TEST(MemberSets, KeyIsSortedAndIgnoresRingOrder) {
  const std::vector<int> ring = {5, 2, 7};
  EXPECT_EQ(member_set(ring), (MemberSet{2, 5, 7}));
  const std::vector<int> other = {7, 5, 2};
  EXPECT_EQ(member_set(ring), member_set(other));
  const std::vector<int> twice = {1, 3, 1};
  EXPECT_THROW(member_set(twice), Error);
  const std::vector<int> negative = {-1, 3};
  EXPECT_THROW(member_set(negative), Error);
}

TEST(MemberSets, DistinctSetsKeepFirstAppearance) {
  const Sets got = distinct_member_sets({{3, 1}, {0}, {1, 3}, {2, 0}, {0}});
  EXPECT_EQ(got, (Sets{{1, 3}, {0}, {0, 2}}));
  EXPECT_THROW(distinct_member_sets({{}}), Error);
}

TEST(MemberSets, SplitRoundsHoldDisjointSetsFirstFit) {
  const Sets sets = {{0, 1}, {2, 3}, {1, 2}, {4}, {0, 3}, {1}};
  const auto rounds = split_rounds(sets);
  // {0,1},{2,3},{4} | {1,2},{0,3} | {1}
  ASSERT_EQ(rounds.size(), 3u);
  EXPECT_EQ(rounds[0], (std::vector<size_t>{0, 1, 3}));
  EXPECT_EQ(rounds[1], (std::vector<size_t>{2, 4}));
  EXPECT_EQ(rounds[2], (std::vector<size_t>{5}));
  // Every set in exactly one round; sets of a round pairwise disjoint.
  std::vector<int> seen(sets.size(), 0);
  for (const auto& round : rounds)
    for (size_t i : round) {
      ++seen[i];
      for (size_t j : round) {
        if (i == j) continue;
        for (int t : sets[i]) {
          EXPECT_EQ(split_colour(sets, {j}, t), -1);
        }
      }
    }
  for (int n : seen) EXPECT_EQ(n, 1);
  EXPECT_TRUE(split_rounds({}).empty());
}

TEST(MemberSets, SplitColourIsTheIndexInTheRoundOrNoColour) {
  const Sets sets = {{0, 1}, {2, 3}, {4}};
  const std::vector<size_t> round = {0, 1, 2};
  EXPECT_EQ(split_colour(sets, round, 0), 0);
  EXPECT_EQ(split_colour(sets, round, 1), 0);
  EXPECT_EQ(split_colour(sets, round, 3), 1);
  EXPECT_EQ(split_colour(sets, round, 4), 2);
  EXPECT_EQ(split_colour(sets, round, 5), -1);
  EXPECT_EQ(split_colour(sets, {1}, 0), -1);
}

TEST(MemberSets, RingPeersWrapAround) {
  const std::vector<int> ring = {4, 1, 6};
  EXPECT_EQ(ring_peers(ring, 0).next, 1);
  EXPECT_EQ(ring_peers(ring, 0).prev, 6);
  EXPECT_EQ(ring_peers(ring, 2).next, 4);
  EXPECT_EQ(ring_peers(ring, 2).prev, 1);
  const std::vector<int> one = {3};
  EXPECT_EQ(ring_peers(one, 0).next, 3);
  EXPECT_EQ(ring_peers(one, 0).prev, 3);
  EXPECT_THROW(ring_peers(ring, 3), Error);
  EXPECT_THROW(ring_peers(ring, -1), Error);
}

TEST(MemberSetLru, RecurringSetsAreCreatedOnce) {
  MemberSetLru lru(4);
  auto plan = lru.prepare({{0, 1}, {2}});
  EXPECT_EQ(plan.create, (Sets{{0, 1}, {2}}));
  EXPECT_TRUE(plan.evict.empty());
  plan = lru.prepare({{2}, {0, 1}, {2}});
  EXPECT_TRUE(plan.create.empty());
  EXPECT_TRUE(plan.evict.empty());
  EXPECT_EQ(lru.size(), 2u);
  EXPECT_TRUE(lru.contains({0, 1}));
  EXPECT_FALSE(lru.contains({1}));
}

TEST(MemberSetLru, EvictsLeastRecentlyUsedBeyondCapacity) {
  MemberSetLru lru(2);
  lru.prepare({{0}});
  lru.prepare({{1}});
  lru.prepare({{0}});  // {1} is now the least recent
  auto plan = lru.prepare({{2}});
  EXPECT_EQ(plan.create, (Sets{{2}}));
  EXPECT_EQ(plan.evict, (Sets{{1}}));
  EXPECT_EQ(lru.sets(), (Sets{{0}, {2}}));  // least recent first
  plan = lru.prepare({{1}});
  EXPECT_EQ(plan.create, (Sets{{1}}));
  EXPECT_EQ(plan.evict, (Sets{{0}}));
}

TEST(MemberSetLru, NeverEvictsTheCurrentStep) {
  MemberSetLru lru(2);
  lru.prepare({{9}});
  auto plan = lru.prepare({{0}, {1}, {2}});  // three sets, capacity two
  EXPECT_EQ(plan.create, (Sets{{0}, {1}, {2}}));
  EXPECT_EQ(plan.evict, (Sets{{9}}));
  EXPECT_EQ(lru.size(), 3u);
  plan = lru.prepare({{1}});  // back to the capacity, least recent out
  EXPECT_TRUE(plan.create.empty());
  EXPECT_EQ(plan.evict, (Sets{{0}}));
  EXPECT_EQ(lru.size(), 2u);
  EXPECT_THROW(MemberSetLru(0), Error);
}

TEST(MemberSetLru, SameInputsGiveSamePlansOnEveryTrainer) {
  // Determinism: two caches fed the same steps agree on every plan.
  const std::vector<Sets> steps = {{{0, 1}, {2, 3}}, {{1, 2}}, {{0, 1}, {3}}, {{4}, {2, 3}}};
  MemberSetLru a(3), b(3);
  for (const Sets& step : steps) {
    const auto pa = a.prepare(step), pb = b.prepare(step);
    EXPECT_EQ(pa.create, pb.create);
    EXPECT_EQ(pa.evict, pb.evict);
  }
  EXPECT_EQ(a.sets(), b.sets());
}

// The NCCL cache's byte bound: each new set is measured after its split and
// settled; prepare() evicts for predictions, trim() for the measurements.
TEST(MemberSetLru, ByteBudgetEvictsForPredictionsThenMeasurements) {
  MemberSetLru lru(64, 100);
  auto plan = lru.prepare({{0, 1}});
  EXPECT_EQ(lru.bytes_of({0, 1}), 0);  // nothing known of a pair yet
  lru.settle({0, 1}, 60);
  EXPECT_TRUE(lru.trim().empty());
  EXPECT_EQ(lru.bytes(), 60);
  // A new pair is predicted at the pair's cost, 60: 120 > 100, so the least
  // recent set goes before the split.
  plan = lru.prepare({{2, 3}});
  EXPECT_EQ(plan.create, (Sets{{2, 3}}));
  EXPECT_EQ(plan.evict, (Sets{{0, 1}}));
  EXPECT_EQ(lru.bytes(), 60);
  lru.settle({2, 3}, 50);
  EXPECT_EQ(lru.bytes(), 50);
  // A set of a new size enters at 0; measured at 70 it takes the cache
  // over the budget, and trim() evicts the least recent other set.
  plan = lru.prepare({{4}});
  EXPECT_TRUE(plan.evict.empty());
  lru.settle({4}, 70);
  EXPECT_EQ(lru.trim(), (Sets{{2, 3}}));
  EXPECT_EQ(lru.bytes(), 70);
  EXPECT_EQ(lru.sets(), (Sets{{4}}));
}

TEST(MemberSetLru, ByteBudgetNeverEvictsTheCurrentStep) {
  MemberSetLru lru(64, 100);
  lru.prepare({{0}});
  lru.settle({0}, 10);
  lru.prepare({{1, 2}, {3, 4}});
  lru.settle({1, 2}, 80);
  lru.settle({3, 4}, 80);
  // Both pairs are this step's: only {0} may go, and the step keeps 160.
  EXPECT_EQ(lru.trim(), (Sets{{0}}));
  EXPECT_EQ(lru.bytes(), 160);
  EXPECT_TRUE(lru.trim().empty());
  // The next step needs one pair: the other goes, back under the budget.
  const auto plan = lru.prepare({{3, 4}});
  EXPECT_EQ(plan.evict, (Sets{{1, 2}}));
  EXPECT_EQ(lru.bytes(), 80);
  EXPECT_THROW(lru.settle({7}, 1), Error);  // not held
  EXPECT_THROW(lru.settle({3, 4}, -1), Error);
}

TEST(MemberSetLru, ByteBoundHoldsOverRandomStepsAndTrainersAgree) {
  // 200 steps of random groups over 8 trainers with costs by size: after
  // each step the cache holds at most the budget, unless the step's own
  // sets exceed it; two caches fed the same inputs evict the same sets.
  std::mt19937 rng(7);
  MemberSetLru a(64, 1000), b(64, 1000);
  int64_t evicted = 0;
  for (int step = 0; step < 200; ++step) {
    std::vector<int> ranks{0, 1, 2, 3, 4, 5, 6, 7};
    std::shuffle(ranks.begin(), ranks.end(), rng);
    std::vector<std::vector<int>> groups;
    for (size_t at = 0; at < ranks.size();) {
      const size_t k = std::min(ranks.size() - at, size_t(1 + rng() % 4));
      groups.emplace_back(ranks.begin() + long(at), ranks.begin() + long(at + k));
      at += k;
    }
    const Sets sets = distinct_member_sets(groups);
    const auto pa = a.prepare(sets), pb = b.prepare(sets);
    EXPECT_EQ(pa.evict, pb.evict);
    int64_t step_bytes = 0;
    for (const MemberSet& s : pa.create) {
      const int64_t cost = 100 * int64_t(s.size()) + int64_t(rng() % 50);  // noisy measurement
      a.settle(s, cost);
      b.settle(s, cost);
    }
    const Sets ta = a.trim(), tb = b.trim();
    EXPECT_EQ(ta, tb);
    evicted += int64_t(pa.evict.size() + ta.size());
    for (const MemberSet& s : sets) step_bytes += a.bytes_of(s);
    EXPECT_LE(a.bytes(), std::max<int64_t>(1000, step_bytes)) << "step " << step;
    for (const MemberSet& s : sets) EXPECT_TRUE(a.contains(s));
    EXPECT_EQ(a.sets(), b.sets());
  }
  EXPECT_GT(evicted, 0);  // the budget, not the count, did the evicting
}

}  // namespace
}  // namespace meshloom::comm
