// The CPU group-communicator cache (comm/group_comms.hpp) under real MPI: 50
// steps of varying plans. Every rank must make the same splits in the same
// order (their logs are compared across ranks), the cache stays within its
// bound, a steady workload (groups drawn from a fixed pool) is served from
// the cache more than 90% of the time, and each communicator handed out
// works (a sum over it) with its ranks in the sorted member order.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "comm/group_comms.hpp"
#include "tests/common/mpi_test_util.hpp"

namespace meshloom::comm {
namespace {

using test::rank_of;
using test::size_of;

// A step: 1-3 groups drawn from `pool` (the same on every rank: one seed),
// each in a random ring order.
std::vector<std::vector<int>> step_groups(const std::vector<std::vector<int>>& pool,
                                          std::mt19937& rng) {
  std::uniform_int_distribution<size_t> pick(0, pool.size() - 1), count(1, 3);
  std::vector<std::vector<int>> out;
  for (size_t n = count(rng); n > 0; --n) {
    std::vector<int> g = pool[pick(rng)];
    std::shuffle(g.begin(), g.end(), rng);
    out.push_back(g);
  }
  return out;
}

// Every group holding this rank: a sum over its communicator gives the sum of
// its members' parent ranks, and its rank is this rank's place in the set.
void check_groups(const MpiGroupComms& groups, const std::vector<std::vector<int>>& step) {
  const int me = rank_of(MPI_COMM_WORLD);
  for (const auto& g : step) {
    if (std::find(g.begin(), g.end(), me) == g.end()) continue;
    MPI_Comm c = groups.get(g);
    std::vector<int> sorted = g;
    std::sort(sorted.begin(), sorted.end());
    ASSERT_EQ(size_of(c), int(g.size()));
    EXPECT_EQ(rank_of(c), int(std::find(sorted.begin(), sorted.end(), me) - sorted.begin()));
    int sum = me;
    MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_INT, MPI_SUM, c);
    EXPECT_EQ(sum, std::accumulate(g.begin(), g.end(), 0));
  }
}

// The log of splits, the same bytes on every rank.
void expect_same_log_everywhere(const MpiGroupComms& groups) {
  std::string log;
  for (const MemberSet& s : groups.split_log()) log += to_string(s) + ";";
  int len = int(log.size()), max_len = 0, min_len = 0;
  MPI_Allreduce(&len, &max_len, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(&len, &min_len, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  ASSERT_EQ(min_len, max_len) << "ranks split different sets";
  std::vector<char> all(size_t(max_len) * size_t(size_of(MPI_COMM_WORLD)));
  MPI_Allgather(log.data(), len, MPI_CHAR, all.data(), len, MPI_CHAR, MPI_COMM_WORLD);
  for (int r = 0; r < size_of(MPI_COMM_WORLD); ++r)
    EXPECT_EQ(std::string(all.data() + size_t(r) * size_t(len), size_t(len)), log)
        << "rank " << r << " split other sets";
}

// Up to `sets` distinct groups of 2 or more ranks (as many as exist).
std::vector<std::vector<int>> pool_of(int ranks, size_t sets, uint32_t seed) {
  sets = std::min(sets, (size_t(1) << ranks) - size_t(ranks) - 1);
  std::mt19937 rng(seed);
  std::vector<std::vector<int>> pool;
  std::vector<int> all(static_cast<size_t>(ranks));
  std::iota(all.begin(), all.end(), 0);
  while (pool.size() < sets) {
    std::shuffle(all.begin(), all.end(), rng);
    const size_t k = 2 + rng() % size_t(ranks - 1);
    std::vector<int> g(all.begin(), all.begin() + long(k));
    std::sort(g.begin(), g.end());
    if (std::find(pool.begin(), pool.end(), g) == pool.end()) pool.push_back(g);
  }
  return pool;
}

// 50 steps of groups from `pool`, each checked; what the cache did in all.
GroupCommStats run_steps(MpiGroupComms& groups, const std::vector<std::vector<int>>& pool,
                         uint32_t seed) {
  std::mt19937 rng(seed);
  GroupCommStats total;
  for (int step = 0; step < 50; ++step) {
    const auto step_list = step_groups(pool, rng);
    total += groups.prepare(step_list);
    // Over the bound only while one step itself needs more sets.
    EXPECT_LE(groups.size(), std::max<size_t>(groups.capacity(), step_list.size()));
    check_groups(groups, step_list);
  }
  return total;
}

TEST(MpiGroupComms, SteadyWorkloadHitsTheCacheAndEveryRankSplitsAlike) {
  const int ranks = size_of(MPI_COMM_WORLD);
  if (ranks < 2) GTEST_SKIP() << "groups need two ranks";
  const auto pool = pool_of(ranks, 6, 3);
  MpiGroupComms groups(MPI_COMM_WORLD, 8);
  const GroupCommStats total = run_steps(groups, pool, 11);
  EXPECT_LE(groups.size(), groups.capacity());
  const double hit_rate = double(total.hits) / double(total.hits + total.misses);
  EXPECT_GT(hit_rate, 0.9) << total.hits << " hits, " << total.misses << " misses";
  EXPECT_EQ(total.evictions, 0);
  expect_same_log_everywhere(groups);
}

TEST(MpiGroupComms, ABoundedCacheEvictsAlikeOnEveryRank) {
  const int ranks = size_of(MPI_COMM_WORLD);
  if (ranks < 3) GTEST_SKIP() << "needs three ranks for more distinct groups than the bound";
  const auto pool = pool_of(ranks, 7, 5);
  MpiGroupComms groups(MPI_COMM_WORLD, 3);
  const GroupCommStats total = run_steps(groups, pool, 13);
  EXPECT_GT(total.evictions, 0);
  EXPECT_EQ(total.hits + total.misses, int64_t(groups.split_log().size()) + total.hits);
  expect_same_log_everywhere(groups);
}

}  // namespace
}  // namespace meshloom::comm
