// The planner's preference for cached group communicators
// (plan/cache_relabel.hpp): relabeling keeps every plan valid and its time
// exactly, moves ranks only within their node, keeps cached groups in place,
// and on a steady stream of real-length steps makes the trainers' cache
// (its own LRU, comm/member_sets.hpp) hit more often.
#include "plan/cache_relabel.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "comm/member_sets.hpp"
#include "plan/planner.hpp"
#include "tests/plan/plan_test_util.hpp"

namespace meshloom::plan {
namespace {

constexpr int64_t K = 1024, M = 1024 * K;

// The sorted member sets of a plan's groups of two or more, in plan order.
std::vector<std::vector<int>> plan_sets(const Plan& p) {
  std::vector<std::vector<int>> groups;
  for (int32_t s = 0; s < p.sequences(); ++s)
    if (p.group_size(s) > 1) groups.emplace_back(p.group(s).begin(), p.group(s).end());
  return comm::distinct_member_sets(groups);
}

TEST(CacheRelabel, KeepsPlansValidAndTheirTimeWithinNodes) {
  const CostModel cost = plantest::llama7b_cost();
  Rng rng(7);
  int relabeled = 0;
  for (int i = 0; i < 300; ++i) {
    const plantest::Batch b = plantest::random_batch(rng, 32, 0.7, 200);
    PlannerOptions o;
    o.trainers = b.trainers;
    o.capacity = b.capacity;
    const Plan p = plan_step({config::Planner::hdp}, b.lengths, o, cost);
    // A random node layout (or none) and a cache of random sets.
    std::vector<int32_t> nodes;
    const int per_node = 1 + int(rng.below(8));
    if (rng.below(2)) nodes = uniform_nodes(b.trainers, per_node);
    std::vector<std::vector<int32_t>> cached;
    for (int c = 0; c < 12 && b.trainers > 1; ++c) {
      std::vector<int32_t> all(size_t(b.trainers));
      for (int32_t r = 0; r < b.trainers; ++r) all[size_t(r)] = r;
      for (size_t j = all.size() - 1; j > 0; --j) std::swap(all[j], all[rng.below(j + 1)]);
      all.resize(2 + rng.below(uint64_t(std::min<int32_t>(b.trainers, 8) - 1)));
      std::sort(all.begin(), all.end());
      cached.push_back(all);
    }
    const std::vector<int32_t> to = cache_relabeling(p, cached, nodes);
    for (int32_t r = 0; r < b.trainers; ++r) {
      if (!nodes.empty()) {
        ASSERT_EQ(nodes[size_t(to[size_t(r)])], nodes[size_t(r)]);
      }
    }
    const Plan q = relabel_ranks(p, to);
    ASSERT_EQ(q.validate(), "") << "batch " << i;
    ASSERT_EQ(q.makespan(), p.makespan());
    relabeled += q != p;
    // Every group's member set that was cached stays where it was.
    for (const auto& set : plan_sets(p)) {
      if (std::find(cached.begin(), cached.end(), set) == cached.end()) continue;
      for (int r : set) ASSERT_EQ(to[size_t(r)], r);
    }
  }
  EXPECT_GT(relabeled, 30);  // the check above is not empty
}

// Hits of the trainers' cache over `steps` steps of GitHub lengths on 16
// HDP ranks, 2 nodes of 8, with or without the relabeling.
double hit_rate(bool relabel, int steps) {
  const CostModel base = plantest::llama7b_cost();
  CostModel cost = base;
  cost.set_nodes(uniform_nodes(16, 8));
  PlannerOptions o;
  o.trainers = 16;
  o.capacity = 16 * K;
  o.seq_len_max = 256 * K;
  comm::MemberSetLru cache(64);
  int64_t hits = 0, all = 0;
  for (int s = 0; s < steps; ++s) {
    const auto lengths =
        draw_batch(LengthSampler::named("github"), 16 * 16 * K, 256 * K, uint64_t(100 + s));
    Plan p = plan_step({config::Planner::hdp}, lengths, o, cost);
    if (relabel) {
      std::vector<std::vector<int32_t>> cached = cache.sets();
      std::reverse(cached.begin(), cached.end());
      p = relabel_ranks(p, cache_relabeling(p, cached, cost.nodes()));
    }
    const auto sets = plan_sets(p);
    const comm::MemberSetLru::Plan made = cache.prepare(sets);
    all += int64_t(sets.size());
    hits += int64_t(sets.size() - made.create.size());
  }
  return all ? double(hits) / double(all) : 1.0;
}

TEST(CacheRelabel, SteadyRealLengthsHitTheCacheMoreOften) {
  const double plain = hit_rate(false, 50), preferred = hit_rate(true, 50);
  std::printf(
      "cache hit rate over 50 steps (GitHub lengths, 16 ranks, 2 nodes): %.1f%% as "
      "planned, %.1f%% relabeled\n",
      100 * plain, 100 * preferred);
  EXPECT_GT(preferred, plain + 0.03);
}

}  // namespace
}  // namespace meshloom::plan
