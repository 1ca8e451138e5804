// Topology in the plan: the cost model's node layout, rings placed inside
// nodes, the intra-node link in the prediction, and plans unchanged where
// there is one node or no node layout.
#include <gtest/gtest.h>

#include "plan/io/summary.hpp"
#include "plan/node_placement.hpp"
#include "plan/planner.hpp"
#include "tests/plan/plan_test_util.hpp"

using namespace meshloom;
using namespace meshloom::plan;

namespace {

constexpr int64_t C = 8192;

PlannerOptions opts(int32_t T, bool widen = true) {
  PlannerOptions o;
  o.trainers = T;
  o.capacity = C;
  o.widen = widen;
  return o;
}

// LLaMA-7B without the simulator's uniform 8 a node, on the given nodes.
CostModel cost_on(std::vector<int32_t> nodes) {
  CostModel c = plantest::llama7b_cost();
  c.trainers_per_node = 0;
  c.set_nodes(std::move(nodes));
  return c;
}

// One 4C sequence (a 4-way ring) and twelve of C, on 8 trainers.
std::vector<int64_t> ring_of_four() {
  std::vector<int64_t> lengths = {4 * C};
  for (int i = 0; i < 12; ++i) lengths.push_back(C);
  return lengths;
}

std::vector<int32_t> members(const Plan& p, int32_t seq) {
  const auto g = p.group(seq);
  return {g.begin(), g.end()};
}

// The same groups and micro-batches in the same order, at the same times.
void expect_same_plan(const Plan& p, const Plan& q, const std::string& what) {
  EXPECT_EQ(p.planner, q.planner) << what;
  EXPECT_EQ(p.members, q.members) << what;
  EXPECT_EQ(p.group_begin, q.group_begin) << what;
  EXPECT_EQ(p.pieces, q.pieces) << what;
  EXPECT_EQ(p.trainer_begin, q.trainer_begin) << what;
  EXPECT_EQ(p.micro_batches, q.micro_batches) << what;
  EXPECT_EQ(p.cp, q.cp) << what;
}

}  // namespace

TEST(Topology, TheCostModelKnowsNodesExplicitlyOrUniformly) {
  CostModel c = plantest::llama7b_cost();  // uniform: 8 a node
  EXPECT_TRUE(c.knows_nodes());
  EXPECT_EQ(c.node_of(9), 1);
  EXPECT_EQ(c.largest_node(), 8);
  EXPECT_FALSE(c.places_by_node()) << "a uniform layout only sets links";
  const int32_t across[] = {6, 7, 8};
  EXPECT_FALSE(c.one_node(across));
  EXPECT_EQ(c.nodes_spanned(across), 2);

  c.set_nodes({0, 1, 1, 1, 2, 2});  // explicit: uneven nodes, the uniform form unused
  EXPECT_EQ(c.node_of(0), 0);
  EXPECT_EQ(c.node_of(3), 1);
  EXPECT_EQ(c.largest_node(), 3);
  EXPECT_TRUE(c.places_by_node());
  const int32_t inside[] = {1, 2, 3}, two[] = {3, 4}, all[] = {0, 1, 2, 3, 4, 5};
  EXPECT_TRUE(c.one_node(inside));
  EXPECT_EQ(c.nodes_spanned(inside), 1);
  EXPECT_EQ(c.nodes_spanned(two), 2);
  EXPECT_EQ(c.nodes_spanned(all), 3);
  EXPECT_TRUE(c.cp_links(inside, 1).ring_intra);
  EXPECT_FALSE(c.cp_links(two, 1).ring_intra);
  EXPECT_THROW(c.set_nodes({0, -1}), Error);

  c.set_nodes({0, 0, 0, 0});
  EXPECT_FALSE(c.places_by_node()) << "one node: nothing to place";
  c.set_nodes({});
  c.trainers_per_node = 0;
  EXPECT_FALSE(c.knows_nodes());
  EXPECT_EQ(c.node_of(3), -1);
  EXPECT_FALSE(c.one_node(inside));
  EXPECT_EQ(c.nodes_spanned(inside), 0);

  EXPECT_EQ(uniform_nodes(7, 3), (std::vector<int32_t>{0, 0, 0, 1, 1, 1, 2}));
}

TEST(Topology, AFourWayRingStaysInsideANodeOfFour) {
  // Two nodes of 4 HDP ranks, interleaved (ranks 0, 2, 4, 6 on node 0): in
  // rank order the ring would take 0-3 and cross.
  const CostModel cost = cost_on({0, 1, 0, 1, 0, 1, 0, 1});
  for (bool widen : {false, true}) {
    const Plan p = plan_step({config::Planner::hdp}, ring_of_four(), opts(8, widen), cost);
    ASSERT_EQ(p.validate(), "");
    ASSERT_EQ(p.group_size(0), 4) << widen;
    EXPECT_TRUE(cost.one_node(p.group(0))) << ::testing::PrintToString(members(p, 0));
  }
  // Without nodes the same batch's ring runs on ranks 0-3 (both nodes here).
  const Plan flat = plan_step({config::Planner::hdp}, ring_of_four(), opts(8, false), cost_on({}));
  EXPECT_EQ(members(flat, 0), (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_FALSE(cost.one_node(flat.group(0)));
}

TEST(Topology, AFourWayRingGoesToTheNodeOfFiveNotThree) {
  // Nodes of 3 and 5 HDP ranks in blocks: ranks 0-3 would cross.
  const CostModel cost = cost_on({0, 0, 0, 1, 1, 1, 1, 1});
  const Plan p = plan_step({config::Planner::hdp}, ring_of_four(), opts(8, false), cost);
  ASSERT_EQ(p.validate(), "");
  ASSERT_EQ(p.group_size(0), 4);
  for (int32_t r : p.group(0)) EXPECT_GE(r, 3) << ::testing::PrintToString(members(p, 0));
  // A ring wider than any node crosses, as it must.
  const Plan wide = plan_step({config::Planner::hdp}, {6 * C, C, C}, opts(8, false), cost);
  ASSERT_EQ(wide.validate(), "");
  EXPECT_EQ(cost.nodes_spanned(wide.group(0)), 2);
}

TEST(Topology, AnIntraNodeRingIsTimedWithTheIntraNodeBandwidth) {
  // Slow links between nodes make the ring communication-bound, so the link
  // it is timed with shows in its duration.
  CostModel cost = cost_on({0, 0, 0, 0, 1, 1, 1, 1});
  cost.bandwidth = 1e9;
  cost.intra_bandwidth = 100e9;
  const Plan p = plan_step({config::Planner::hdp}, {4 * C}, opts(8, false), cost);
  ASSERT_EQ(p.validate(), "");
  ASSERT_EQ(p.group_size(0), 4);
  ASSERT_TRUE(cost.one_node(p.group(0)));
  const MicroBatch& mb = p.micro_batches_of(p.group(0)[0])[0];
  const double tokens = double(C), l2 = double(4 * C) * double(4 * C) / 4;
  const double intra = cost.micro_batch(tokens, l2, 4, true);
  const double inter = cost.micro_batch(tokens, l2, 4, false);
  ASSERT_LT(intra, 0.8 * inter) << "the test needs a communication-bound ring";
  EXPECT_NEAR(mb.end - mb.start, intra, 1e-6 * intra);
  // Across nodes (4 ranks on alternating nodes) the same ring takes the slow link.
  CostModel across = cost;
  across.set_nodes({0, 1, 0, 1});
  const Plan q = plan_step({config::Planner::hdp}, {4 * C}, opts(4, false), across);
  ASSERT_EQ(q.validate(), "");
  const MicroBatch& mq = q.micro_batches_of(q.group(0)[0])[0];
  EXPECT_NEAR(mq.end - mq.start, inter, 1e-6 * inter);
}

TEST(Topology, OneNodeOrNoNodesPlansAsBefore) {
  // One node, intra-node bandwidth = bandwidth (plan.intra_bandwidth's
  // default): the same plan, times included, as without any node layout.
  Rng rng(5);
  int split = 0;
  for (int i = 0; i < 60; ++i) {
    const plantest::Batch b = plantest::random_batch(rng, 48, 1.0, 120);
    CostModel none = plantest::llama7b_cost();
    none.trainers_per_node = 0;
    none.intra_bandwidth = none.bandwidth;
    CostModel one = none;
    one.set_nodes(std::vector<int32_t>(size_t(b.trainers), 0));
    PlannerOptions o;
    o.trainers = b.trainers;
    o.capacity = b.capacity;
    o.offload = i % 3 == 0;
    for (config::Planner name :
         {config::Planner::hdp, config::Planner::bytescale, config::Planner::static_grid}) {
      try {
        const Plan p = plan_step({name}, b.lengths, o, none);
        const Plan q = plan_step({name}, b.lengths, o, one);
        expect_same_plan(p, q,
                         std::string(config::enum_name(name)) + " batch " + std::to_string(i));
        split += plan_stats(p).split_sequences > 0;
      } catch (const Error&) {  // the static grid cannot hold every batch
      }
    }
  }
  EXPECT_GT(split, 10) << "the batches should split sequences";
}

TEST(Topology, FreeTrainersPickTheEarliestOfOneNode) {
  const CostModel cost = cost_on({0, 1, 0, 1, 1});
  FreeTrainers free(cost, 5);
  EXPECT_EQ(free.earliest(2).ranks, (std::vector<int32_t>{0, 1}));
  // Node 0 holds just two, node 1 three: equal starts, node 0 fits best.
  std::optional<RingPick> local = free.earliest_in_one_node(2);
  ASSERT_TRUE(local);
  EXPECT_EQ(local->ranks, (std::vector<int32_t>{0, 2}));
  EXPECT_FALSE(free.earliest_in_one_node(4));
  const int32_t busy[] = {0};
  free.occupy(busy, 5.0);
  local = free.earliest_in_one_node(2);  // node 0 now starts at 5, node 1 at 0
  ASSERT_TRUE(local);
  EXPECT_EQ(local->ranks, (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(local->start, 0.0);
  EXPECT_EQ(free.earliest(4).ranks, (std::vector<int32_t>{1, 2, 3, 4}));
  const RingPick all = free.earliest(5);
  EXPECT_EQ(all.ranks, (std::vector<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(all.start, 5.0);
}

TEST(Topology, ShelfRingsArePackedIntoNodes) {
  const CostModel cost = cost_on({0, 0, 0, 0, 1, 1, 1, 1});
  const int32_t ks[] = {2, 2, 4};
  const auto ranks = shelf_ranks_by_node(cost, 8, ks);
  EXPECT_EQ(ranks[2], (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(ranks[0], (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(ranks[1], (std::vector<int32_t>{6, 7}));
  // Two rings of 3 fill a node each; the ring of 2 takes what is left.
  const int32_t odd[] = {3, 2, 3};
  const auto left = shelf_ranks_by_node(cost, 8, odd);
  EXPECT_EQ(left[0], (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(left[2], (std::vector<int32_t>{4, 5, 6}));
  EXPECT_EQ(left[1], (std::vector<int32_t>{3, 7}));
  // Any free ranks, not only the shelf's region: nodes of 8 and 4, rings of
  // 6 and 4 (a region of 10 would cut the 4 over ranks 6-9).
  const CostModel eight_four = cost_on({0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1});
  const int32_t two[] = {6, 4};
  const auto both = shelf_ranks_by_node(eight_four, 12, two);
  EXPECT_EQ(both[0], (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(both[1], (std::vector<int32_t>{8, 9, 10, 11}));
}

TEST(Topology, TheRingTableCountsNodeBoundaries) {
  const CostModel cost = cost_on({0, 0, 0, 1, 1, 1, 1, 1});
  const Plan p = plan_step({config::Planner::hdp}, {4 * C, 6 * C, C, C}, opts(8, false), cost);
  ASSERT_EQ(p.validate(), "");
  const std::string table = ring_table(p, cost, 10);
  EXPECT_NE(table.find("crosses"), std::string::npos) << table;
  EXPECT_NE(table.find("2 rings: 1 inside one node, 1 across nodes; node boundaries crossed: 1"),
            std::string::npos)
      << table;
  EXPECT_NE(ring_table(p, cost_on({}), 10).find("no node layout known"), std::string::npos);
  EXPECT_EQ(
      ring_table(plan_step({config::Planner::hdp}, {C, C}, opts(2), cost_on({})), cost_on({}), 10),
      "");
}

// Random batches on random layouts: every plan valid; against the same
// nodes taken for links only (uniform trainers_per_node, rank order), placing
// rings inside nodes is faster on some steps and about as fast on the rest
// (each candidate schedule keeps the faster placement; the search over
// shelf regions may take another path).
TEST(Topology, PlacingByNodeIsValidAndFasterOnSomeSteps) {
  Rng rng(17);
  int faster = 0;
  double slowest = 1, sum = 0;
  const int steps = 300;
  for (int i = 0; i < steps; ++i) {
    const plantest::Batch b = plantest::random_batch(rng, 64, 1.0, 200);
    const int32_t per = 1 + int32_t(rng.below(8));
    CostModel links_only = plantest::llama7b_cost();
    links_only.trainers_per_node = per;
    CostModel placed = links_only;
    placed.set_nodes(uniform_nodes(b.trainers, per));
    PlannerOptions o;
    o.trainers = b.trainers;
    o.capacity = b.capacity;
    o.offload = i % 4 == 0;
    const Plan p = plan_step({config::Planner::hdp}, b.lengths, o, links_only);
    const Plan q = plan_step({config::Planner::hdp}, b.lengths, o, placed);
    ASSERT_EQ(q.validate(), "") << i;
    const double r = q.makespan() / p.makespan();
    sum += r;
    slowest = std::max(slowest, r);
    faster += r < 1 - 1e-9;
    // Any layout, nodes interleaved and uneven: still valid plans.
    std::vector<int32_t> shuffled(size_t(b.trainers));
    for (auto& n : shuffled) n = int32_t(rng.below(3));
    CostModel odd = links_only;
    odd.set_nodes(shuffled);
    ASSERT_EQ(plan_step({config::Planner::hdp}, b.lengths, o, odd).validate(), "") << i;
  }
  EXPECT_GE(faster, 10);
  EXPECT_LT(sum / steps, 0.999);
  EXPECT_LT(slowest, 1.03);
}

TEST(Topology, TheRunsIntraNodeLinkIsPlanIntraBandwidth) {
  config::PlanConfig plan;
  plan.bandwidth = 5e9;
  Hardware hw = hardware_from_config(plan, 2);
  EXPECT_EQ(hw.intra_bandwidth, hw.bandwidth) << "0: plan.bandwidth";
  EXPECT_EQ(hw.bandwidth, 10e9);
  plan.intra_bandwidth = 40e9;
  hw = hardware_from_config(plan, 2);
  EXPECT_EQ(hw.intra_bandwidth, 80e9);
  EXPECT_EQ(hw.trainers_per_node, 0) << "the lead sets the nodes from its hosts";
}
