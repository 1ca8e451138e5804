// PP-Balance as a Plan (pp_plan.hpp, plan.balance: pp): valid plans with
// every token placed once, long sequences as rings, pipelines with cheaper
// micro-batches running more of them, rings counted as a starting load, and
// the plan.balance switch.
#include "plan/pipeline/pp_plan.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/strings.hpp"
#include "plan/model_shape.hpp"
#include "plan/pipeline/pp_balance.hpp"
#include "tests/plan/plan_test_util.hpp"

using namespace meshloom;
using namespace meshloom::plan;

namespace {

const model::Shape& llama7b() {
  static const model::Shape shape = model_shape("llama-7b");
  return shape;
}

PlannerOptions options(int32_t trainers, int64_t capacity) {
  PlannerOptions o;
  o.trainers = trainers;
  o.capacity = capacity;
  return o;
}

// Tokens each sequence has over all its pieces.
std::vector<int64_t> placed_tokens(const Plan& plan) {
  std::vector<int64_t> tokens(plan.sequences(), 0);
  for (const Piece& p : plan.pieces) tokens[p.seq] += plan.chunks(p).tokens();
  return tokens;
}

int32_t count_of(const Plan& plan, int32_t t) { return int32_t(plan.micro_batches_of(t).size()); }

int64_t longest_on(const Plan& plan, int32_t t) {
  int64_t longest = 0;
  for (const MicroBatch& mb : plan.micro_batches_of(t))
    for (const Piece& p : plan.pieces_of(mb)) longest = std::max(longest, plan.lengths[p.seq]);
  return longest;
}

}  // namespace

TEST(PpPlan, RandomBatchesValidEveryTokenOnceLongOnesRings) {
  const CostModel cost = plantest::llama7b_cost();
  Rng rng(7);
  int rings = 0;
  for (int iter = 0; iter < 500; ++iter) {
    const plantest::Batch batch = plantest::random_batch(rng, 16, 1.5, 200);
    PlannerOptions o = options(batch.trainers, batch.capacity);
    o.offload = iter % 4 == 3;
    const int pp = 1 + int(rng.below(4));
    SCOPED_TRACE(strf("iter %d: T %d, C %lld, pp %d, %zu sequences, offload %d", iter, o.trainers,
                      (long long)o.capacity, pp, batch.lengths.size(), int(o.offload)));
    const Plan plan =
        pp_balance_plan(batch.lengths, o, cost, balanced_pipeline(llama7b(), cost, pp, o.capacity));
    ASSERT_EQ(plan.validate(), "");
    EXPECT_EQ(plan.planner, "pp-balance");
    EXPECT_EQ(placed_tokens(plan), batch.lengths);
    for (int32_t s = 0; s < plan.sequences(); ++s) {
      const bool long_one = plan.lengths[s] > o.capacity;
      if (!o.offload) {
        EXPECT_EQ(plan.group_size(s) > 1, long_one) << "sequence " << s;
      }
      if (!long_one) {
        EXPECT_EQ(plan.group_size(s), 1) << "sequence " << s;
      }
      rings += plan.group_size(s) > 1;
    }
    // Rings come first in every list, then whole micro-batches.
    for (int32_t t = 0; t < plan.trainers; ++t) {
      bool whole_seen = false;
      for (const MicroBatch& mb : plan.micro_batches_of(t)) {
        const Piece& first = plan.pieces[mb.piece_begin];
        const bool whole = plan.lengths[first.seq] <= o.capacity;
        EXPECT_FALSE(whole_seen && !whole) << "trainer " << t << ": a ring after whole ones";
        whole_seen = whole_seen || whole;
      }
    }
  }
  EXPECT_GT(rings, 100);
}

TEST(PpPlan, CheaperMicroBatchesRunMoreOfThem) {
  // Four pipelines of four stages, C = 32K: eight 32K sequences and 256 of
  // 1K, the same tokens each (ByteScale's Fig. 12 situation).
  const CostModel cost = plantest::llama7b_cost();
  const int64_t C = 32 * 1024;
  std::vector<int64_t> lengths(8, C);
  lengths.resize(8 + 256, 1024);
  const PlannerOptions o = options(4, C);
  const PipelineModel model = balanced_pipeline(llama7b(), cost, 4, C);
  // PP-Balance in runs of whole micro-batches (Alg. 2's PP variant):
  // pipeline 0 holds the long ones, few micro-batches; the last the short
  // ones, many.
  const PipelineBatch runs = pp_balance(lengths, {4, C, o.slack, {}}, model);
  std::string counts;
  int64_t longest_last = 0;
  for (int32_t p = 0; p < 4; ++p) counts += strf(" %d", runs.micro_batches_of(p));
  for (int32_t j = runs.pipeline_begin[3]; j < runs.pipeline_begin[4]; ++j)
    for (int32_t i : runs.micro_batches[size_t(j)])
      longest_last = std::max(longest_last, lengths[size_t(i)]);
  std::printf("PP-Balance's runs: micro-batches per pipeline:%s\n", counts.c_str());
  EXPECT_EQ(lengths[size_t(runs.micro_batches[0][0])], C) << counts;
  EXPECT_LT(longest_last, C) << counts;
  EXPECT_LT(runs.micro_batches_of(0), runs.micro_batches_of(3)) << counts;
  // The plan takes that or, predicted faster, the placement by sequence.
  const Plan plan = pp_balance_plan(lengths, o, cost, model);
  ASSERT_EQ(plan.validate(), "");
  counts.clear();
  for (int32_t t = 0; t < 4; ++t)
    counts += strf(" %d/%lld", count_of(plan, t), (long long)longest_on(plan, t));
  std::printf("the plan: micro-batches/longest per pipeline:%s\n", counts.c_str());
  EXPECT_LE(slowest_pipeline(plan, model, cost), runs.makespan() * (1 + 1e-9)) << counts;
}

TEST(PpPlan, RingsAreAStartingLoad) {
  // One 8C sequence, a ring over some of 16 pipelines, among short ones:
  // its members take fewer whole micro-batches than the others.
  const CostModel cost = plantest::llama7b_cost();
  const int64_t C = 4096;
  std::vector<int64_t> lengths = {8 * C};
  lengths.resize(1 + 400, 1024);
  const PlannerOptions o = options(16, C);
  const Plan plan = pp_balance_plan(lengths, o, cost, balanced_pipeline(llama7b(), cost, 2, C));
  ASSERT_EQ(plan.validate(), "");
  ASSERT_GT(plan.group_size(0), 1);
  std::vector<int> in_ring(16, 0);
  for (int32_t m : plan.group(0)) in_ring[m] = 1;
  double members = 0, others = 0;
  int n_members = 0;
  for (int32_t t = 0; t < 16; ++t) {
    const double whole = count_of(plan, t) - in_ring[t];
    (in_ring[t] ? members : others) += whole;
    n_members += in_ring[t];
  }
  ASSERT_LT(n_members, 16);
  EXPECT_LT(members / n_members, others / (16 - n_members));
}

TEST(PpPlan, StartingLoadsInPpBalance) {
  const CostModel cost = plantest::llama7b_cost();
  const PipelineModel model = balanced_pipeline(llama7b(), cost, 2, 4096);
  PipelineBalanceOptions o;
  o.pipelines = 2;
  o.capacity = 4096;
  const std::vector<int64_t> lengths(8, 4096);
  const PipelineBatch even = pp_balance(lengths, o, model);
  EXPECT_EQ(even.micro_batches_of(0), 4);
  // Pipeline 0 busy for longer than the whole batch takes: it gets nothing.
  o.start = {10 * even.makespan(), 0};
  const PipelineBatch skewed = pp_balance(lengths, o, model);
  EXPECT_EQ(check_pipeline_batch(skewed, lengths, o), "");
  EXPECT_EQ(skewed.micro_batches_of(0), 0);
  EXPECT_EQ(skewed.micro_batches_of(1), 8);
  // Some load on pipeline 1: it takes fewer than half.
  o.start = {0, 0.5 * even.makespan()};
  EXPECT_LT(pp_balance(lengths, o, model).micro_batches_of(1), 4);
  o.start = {1.0};
  EXPECT_THROW(pp_balance(lengths, o, model), Error);
  o.start = {-1.0, 0};
  EXPECT_THROW(pp_balance(lengths, o, model), Error);
}

// The runtime's plan.balance: pp is a portfolio: PP-Balance's plan, or
// hdp's where its slowest pipeline is predicted faster; never slower than
// either, and each wins somewhere.
TEST(PpPlan, StepPlanIsTheFasterOfPpBalanceAndHdp) {
  const CostModel cost = plantest::llama7b_cost();
  Rng rng(11);
  int hdp_wins = 0, pp_wins = 0;
  for (int iter = 0; iter < 200; ++iter) {
    const plantest::Batch batch = plantest::random_batch(rng, 8, 1.5, 120);
    const PlannerOptions o = options(batch.trainers, batch.capacity);
    const int pp = 2 + int(rng.below(3));
    SCOPED_TRACE(strf("iter %d: T %d, C %lld, pp %d, %zu sequences", iter, o.trainers,
                      (long long)o.capacity, pp, batch.lengths.size()));
    const PipelineModel model = balanced_pipeline(llama7b(), cost, pp, o.capacity);
    const Plan step = pp_step_plan(batch.lengths, o, cost, model);
    ASSERT_EQ(step.validate(), "");
    EXPECT_EQ(placed_tokens(step), batch.lengths);
    const double mine = slowest_pipeline(step, model, cost);
    const double ppb =
        slowest_pipeline(pp_balance_plan(batch.lengths, o, cost, model), model, cost);
    const double hdp =
        slowest_pipeline(plan_step({config::Planner::hdp}, batch.lengths, o, cost), model, cost);
    EXPECT_LE(mine, ppb * (1 + 1e-9));
    EXPECT_LE(mine, hdp * (1 + 1e-3));
    (step.planner == "hdp" ? hdp_wins : pp_wins) += 1;
  }
  std::printf("pp_step_plan over 200 batches: PP-Balance's plan %d, hdp's %d\n", pp_wins, hdp_wins);
  EXPECT_GT(hdp_wins, 0);
  EXPECT_GT(pp_wins, 0);
}

TEST(PpPlan, BalanceSwitchPicksTheScheduler) {
  const CostModel cost = plantest::llama7b_cost();
  const std::vector<int64_t> lengths = {9000, 300, 4000, 100, 2500};
  const PlannerOptions o = options(4, 4096);
  config::PlanConfig c;
  EXPECT_EQ(c.balance, config::Balance::dp);
  const PipelineModel pipe = balanced_pipeline(llama7b(), cost, 2, o.capacity);
  EXPECT_EQ(plan_step({c.planner, c.balance, &pipe}, lengths, o, cost).planner, "hdp");
  c.planner = config::Planner::bytescale;
  EXPECT_EQ(plan_step({c.planner, c.balance, &pipe}, lengths, o, cost).planner, "bytescale");
  c.balance = config::Balance::pp;
  const Plan p = plan_step({c.planner, c.balance, &pipe}, lengths, o, cost);
  EXPECT_EQ(p.planner, pp_step_plan(lengths, o, cost, pipe).planner);
  EXPECT_EQ(p.validate(), "");
  EXPECT_THROW(plan_step({c.planner, c.balance, &pipe}, {0}, o, cost), Error);
  EXPECT_THROW(balanced_pipeline(llama7b(), cost, 1000, o.capacity), Error);  // pp > layers
}
