// Planner behaviour on hand-made batches: the rules each planner promises.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "plan/io/plan_io.hpp"
#include "plan/planners/hdp_planner.hpp"
#include "plan/planners/static_planner.hpp"
#include "tests/plan/plan_test_util.hpp"

using namespace meshloom;
using namespace meshloom::plan;

namespace {

constexpr int64_t K = 1024, M = 1024 * 1024;

PlannerOptions opts(int32_t T, int64_t C) {
  PlannerOptions o;
  o.trainers = T;
  o.capacity = C;
  return o;
}

}  // namespace

TEST(StaticGrid, CpDegreeIsTheSmallestFittingDivisor) {
  EXPECT_EQ(static_cp_degree(2 * M, 8 * K, 512), 256);  // ByteScale's case study
  EXPECT_EQ(static_cp_degree(2 * M, 8 * K, 1024), 256);
  EXPECT_EQ(static_cp_degree(2 * M, 16 * K, 12288), 128);  // 12288 = 96 x 128
  EXPECT_EQ(static_cp_degree(1 * M, 16 * K, 12288), 64);
  EXPECT_EQ(static_cp_degree(600 * K, 8 * K, 12288), 96);  // 75 -> 96, a divisor
  EXPECT_EQ(static_cp_degree(3 * K, 1 * K, 1024), 4);      // 3 -> 4
  EXPECT_EQ(static_cp_degree(4 * K, 8 * K, 64), 1);        // fits: no CP
  EXPECT_EQ(static_cp_degree(14, 7, 64), 4);  // odd C: 2 x ceil(14/4) = 8 > 7, so 3 -> 4
  EXPECT_THROW(static_cp_degree(2 * M, 8 * K, 128), Error);
  EXPECT_EQ(static_cp_degree(30, 10, 7), 7);  // needs 3; 7 is prime: the whole mesh
}

TEST(StaticGrid, SplitsEverySequenceOverItsCpGroup) {
  const CostModel cost = plantest::llama7b_cost();
  PlannerOptions o = opts(16, 1024);
  o.seq_len_max = 4096;  // CP 4, DP 4
  const std::vector<int64_t> lengths = {4096, 100, 7, 3000, 2000, 1, 1024, 512};
  const Plan p = plan_step({config::Planner::static_grid}, lengths, o, cost);
  ASSERT_EQ(p.validate(), "");
  EXPECT_EQ(p.static_cp, 4);
  for (int32_t s = 0; s < p.sequences(); ++s) {
    auto g = p.group(s);
    ASSERT_EQ(g.size(), 4u) << "even a " << lengths[s] << "-token sequence is split";
    EXPECT_EQ(g[0] % 4, 0);
    for (int c = 1; c < 4; ++c) EXPECT_EQ(g[c], g[0] + c) << "CP inner: consecutive ranks";
  }
  EXPECT_THROW(plan_step({config::Planner::static_grid}, {5000}, o, cost), Error)
      << "longer than seq_len_max";
}

TEST(Hdp, ByteScalesExample768KOn128Ranks) {
  // ByteScale 5.1: with 128 ranks, a 768K sequence takes 96 ranks and 32
  // ranks each hold an 8K sequence; a static mesh would need CP = 128 for all.
  const CostModel cost = plantest::llama7b_cost();
  std::vector<int64_t> lengths = {768 * K};
  for (int i = 0; i < 32; ++i) lengths.push_back(8 * K);
  PlannerOptions o = opts(128, 8 * K);
  o.widen = false;
  const Plan p = plan_step({config::Planner::hdp}, lengths, o, cost);
  ASSERT_EQ(p.validate(), "");
  EXPECT_EQ(p.group_size(0), 96);
  std::vector<int> used(128, 0);
  for (int32_t m : p.group(0)) ++used[m];
  for (int32_t s = 1; s <= 32; ++s) {
    ASSERT_EQ(p.group_size(s), 1);
    EXPECT_EQ(used[p.group(s)[0]], 0) << "the 8K sequences run beside the ring";
    ++used[p.group(s)[0]];
  }
  const Plan st = plan_step({config::Planner::static_grid}, lengths, o, cost);
  EXPECT_EQ(st.static_cp, 128);
  EXPECT_LT(p.comm_bytes(), st.comm_bytes());
}

TEST(Hdp, NeverSplitsWhatFitsAndSplitsTheRestMinimallyWithoutWidening) {
  const CostModel cost = plantest::llama7b_cost();
  PlannerOptions o = opts(64, 4096);
  o.widen = false;
  const std::vector<int64_t> lengths = {4096, 4097, 8192, 8193, 100000, 1, 2, 4095};
  for (config::Planner name :
       {config::Planner::hdp, config::Planner::bytescale, config::Planner::naive}) {
    const Plan p = plan_step({name}, lengths, o, cost);
    ASSERT_EQ(p.validate(), "") << config::enum_name(name);
    for (int32_t s = 0; s < p.sequences(); ++s)
      EXPECT_EQ(p.group_size(s), (lengths[s] + 4095) / 4096)
          << config::enum_name(name) << " L=" << lengths[s];
  }
}

TEST(Hdp, WidensASequenceThatWouldSetTheStepTimeAlone) {
  // One 1M sequence and many short ones on 256 trainers of 16K: at k_min = 64
  // each member does a*1M*16K of attention, several times the mean load.
  const CostModel cost = plantest::llama7b_cost();
  std::vector<int64_t> lengths = {1 * M};
  for (int i = 0; i < 700; ++i) lengths.push_back(4 * K);
  const PlannerOptions o = opts(256, 16 * K);
  const Plan p = plan_step({config::Planner::hdp}, lengths, o, cost);
  ASSERT_EQ(p.validate(), "");
  EXPECT_GT(p.group_size(0), 64);
  PlannerOptions narrow = o;
  narrow.widen = false;
  const Plan q = plan_step({config::Planner::hdp}, lengths, narrow, cost);
  EXPECT_EQ(q.group_size(0), 64);
  EXPECT_LT(p.makespan(), 0.8 * q.makespan());
  // The step cannot beat the fastest ring the 1M sequence can run: beyond
  // some width its K/V traffic, not its attention, sets the member time.
  double fastest = INFINITY;
  for (int k = 64; k <= 256; ++k) fastest = std::min(fastest, cost.piece(1 * M, k));
  const double bound = std::max(ideal_step_time(lengths, o, cost), fastest);
  EXPECT_LT(p.makespan(), 1.03 * bound) << "bound " << bound;
}

TEST(Hdp, SmallGroupsStartAsRunsOfConsecutiveRanks) {
  const CostModel cost = plantest::llama7b_cost();
  const Plan p = plan_step({config::Planner::hdp}, {40000, 3000, 3000}, opts(16, 8192), cost);
  ASSERT_EQ(p.validate(), "");
  auto g = p.group(0);
  for (size_t c = 1; c < g.size(); ++c) EXPECT_EQ(g[c], g[c - 1] + 1);
}

TEST(Hdp, TrainersRunDifferentNumbersOfMicroBatches) {
  // Contexts up to 256K and a 100 GB/s link: no single ring sets the step,
  // so balance decides.
  CostModel cost = plantest::llama7b_cost();
  cost.bandwidth = 100e9;
  const auto lengths = draw_batch(LengthSampler::named("byted"), int64_t(256) * 8 * K, 256 * K, 5);
  ASSERT_GE(ideal_bound(lengths, opts(256, 8 * K), cost).balanced,
            ideal_step_time(lengths, opts(256, 8 * K), cost));
  const Plan p = plan_step({config::Planner::hdp}, lengths, opts(256, 8 * K), cost);
  ASSERT_EQ(p.validate(), "");
  const PlanStats st = plan_stats(p);
  EXPECT_GT(st.max_micro_batches, st.min_micro_batches + 2);
  EXPECT_LT(st.imbalance, 1.05);
}

TEST(Hdp, StaticFallbackTakesTheGridWhereItIsFaster) {
  // T = 4, lengths 4C, C, C: the grid (CP 4) splits all three, so its step is
  // about cost(4C)/4 + 2 cost(C)/4; HDP never splits what fits in C, so each
  // C runs whole after the 4C ring: at least cost(4C)/4 + cost(C).
  const CostModel cost = plantest::llama7b_cost();
  const int64_t C = 8 * K;
  const std::vector<int64_t> lengths = {4 * C, C, C};
  PlannerOptions o = opts(4, C);
  const Plan hdp = plan_step({config::Planner::hdp}, lengths, o, cost);
  const Plan grid = plan_step({config::Planner::static_grid}, lengths, o, cost);
  ASSERT_EQ(hdp.validate(), "");
  ASSERT_EQ(grid.static_cp, 4);
  EXPECT_FALSE(hdp.static_fallback());
  EXPECT_EQ(hdp.group_size(1), 1);
  EXPECT_EQ(hdp.group_size(2), 1);
  EXPECT_GT(hdp.makespan(), 1.1 * grid.makespan());

  o.static_fallback = true;
  const Plan fb = plan_step({config::Planner::hdp}, lengths, o, cost);
  ASSERT_EQ(fb.validate(), "");
  EXPECT_EQ(fb.planner, "hdp");
  EXPECT_TRUE(fb.static_fallback());
  EXPECT_EQ(fb.static_cp, 4);
  EXPECT_EQ(fb.makespan(), std::min(hdp.makespan(), grid.makespan()));
  EXPECT_EQ(fb.group_size(1), 4) << "the fallback splits a sequence that fits in C";
  EXPECT_GT(fb.planning_seconds, 0);
  // The mark travels: wire format and JSON dump.
  const Plan round = deserialize(serialize(fb));
  EXPECT_TRUE(round == fb);
  EXPECT_TRUE(round.static_fallback());
  const auto j = nlohmann::json::parse(to_json(fb));
  EXPECT_EQ(j["planner"], "hdp");
  EXPECT_EQ(j["fallback"], "static");
  EXPECT_FALSE(nlohmann::json::parse(to_json(hdp)).contains("fallback"));
  EXPECT_FALSE(grid.static_fallback()) << "the static planner's own plan is no fallback";

  // A grid that cannot hold the batch (longer than seq_len_max): HDP's plan stands.
  o.seq_len_max = 2 * C;
  EXPECT_THROW(plan_step({config::Planner::static_grid}, lengths, o, cost), Error);
  const Plan kept = plan_step({config::Planner::hdp}, lengths, o, cost);
  EXPECT_FALSE(kept.static_fallback());
  EXPECT_EQ(kept.makespan(), hdp.makespan());

  // plan.static_fallback in the config, off by default.
  config::PlanConfig pc;
  EXPECT_FALSE(options_from_config(pc, 4, 0).static_fallback);
  pc.static_fallback = true;
  EXPECT_TRUE(options_from_config(pc, 4, 0).static_fallback);
}

TEST(Hdp, StaticFallbackKeepsHdpOnRealisticBatches) {
  // Long-tailed steps of T x C tokens: HDP beats the grid, so the option
  // changes nothing (the same plan, not marked), and sequences that fit in
  // C still never communicate.
  const CostModel cost = plantest::llama7b_cost();
  for (int32_t T : {64, 256}) {
    PlannerOptions o = opts(T, 16 * K);
    o.seq_len_max = 256 * K;
    const auto lengths =
        draw_batch(LengthSampler::named("byted"), int64_t(T) * 16 * K, 256 * K, uint64_t(T));
    const Plan hdp = plan_step({config::Planner::hdp}, lengths, o, cost);
    const Plan grid = plan_step({config::Planner::static_grid}, lengths, o, cost);
    ASSERT_LT(hdp.makespan(), grid.makespan()) << "T=" << T;
    o.static_fallback = true;
    Plan fb = plan_step({config::Planner::hdp}, lengths, o, cost);
    ASSERT_EQ(fb.validate(), "");
    EXPECT_FALSE(fb.static_fallback()) << "T=" << T;
    EXPECT_EQ(fb.static_cp, 0);
    fb.planning_seconds = hdp.planning_seconds;
    EXPECT_TRUE(fb == hdp) << "T=" << T;
    for (int32_t s = 0; s < fb.sequences(); ++s) {
      if (lengths[s] <= 16 * K) {
        ASSERT_EQ(fb.group_size(s), 1);
      }
    }
  }
}

TEST(Offload, NeedsFewerTrainersAndStaysWithinCapacity) {
  const CostModel cost = plantest::llama7b_cost();
  PlannerOptions o = opts(512, 8 * K);
  o.offload = true;
  const Split s = min_split(2 * M, o, cost);
  EXPECT_LT(s.k, 256);
  EXPECT_GE(s.k, int32_t((2 * 2 * M + 32 * 8 * K - 1) / (32 * 8 * K)));  // r = 1 bound
  EXPECT_GT(s.ratio, 0.f);
  EXPECT_LE(s.ratio, 1.f);
  // A sequence a little over C runs whole with part of its activations on the host.
  const Split one = min_split(9 * K, o, cost);
  EXPECT_EQ(one.k, 1);
  EXPECT_GT(one.ratio, 0.f);
  EXPECT_EQ(min_split(8 * K, o, cost).ratio, 0.f);
  const auto lengths = draw_batch(LengthSampler::named("byted"), int64_t(512) * 8 * K, 2 * M, 9);
  const Plan with = plan_step({config::Planner::hdp}, lengths, o, cost);
  ASSERT_EQ(with.validate(), "");
  int fewer = 0;  // sequences on fewer trainers than their length needs without offloading
  for (int32_t q = 0; q < with.sequences(); ++q)
    fewer += with.offload_ratio(q) > 0 && with.group_size(q) < (lengths[q] + 8 * K - 1) / (8 * K);
  EXPECT_GT(fewer, 0);
  const Plan round = deserialize(serialize(with));
  EXPECT_TRUE(round == with);
}

TEST(Planners, RefuseWhatCannotBePlanned) {
  const CostModel cost = plantest::llama7b_cost();
  auto message = [&](config::Planner planner, std::vector<int64_t> lengths, PlannerOptions o) {
    try {
      plan_step({planner}, lengths, o, cost);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const config::Planner hdp = config::Planner::hdp;
  EXPECT_NE(message(hdp, {100000}, opts(4, 8192)).find("needs 13 trainers"), std::string::npos);
  EXPECT_NE(message(hdp, {0}, opts(4, 8192)).find("positive"), std::string::npos);
  EXPECT_NE(message(hdp, {1}, opts(0, 8192)).find("trainers"), std::string::npos);
  // A planner's name is read where it is given (the config, --planner).
  try {
    config::choice_from_name<config::Planner>("hpd", "--planner");
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'hdp'"), std::string::npos);
  }
  // An empty batch is a valid (idle) step.
  const Plan p = plan_step({config::Planner::hdp}, {}, opts(4, 8192), cost);
  EXPECT_EQ(p.validate(), "");
  EXPECT_EQ(p.makespan(), 0);
}

TEST(Planners, PlansRespectTheLowerBounds) {
  const CostModel cost = plantest::llama7b_cost();
  const auto lengths = draw_batch(LengthSampler::named("github"), int64_t(128) * 16 * K, 1 * M, 4);
  PlannerOptions o = opts(128, 16 * K);
  o.seq_len_max = 1 * M;
  const double ideal = ideal_step_time(lengths, o, cost);
  for (config::Planner name : all_planners()) {
    const Plan p = plan_step({name}, lengths, o, cost);
    ASSERT_EQ(p.validate(), "") << config::enum_name(name);
    // The ideal bounds every HDP plan (static may split what HDP may not).
    if (name != config::Planner::static_grid) {
      EXPECT_GE(p.makespan(), ideal * (1 - 1e-6)) << config::enum_name(name);
    }
    const PlanStats st = plan_stats(p);
    EXPECT_GE(st.makespan, st.lower_bound * (1 - 1e-6)) << config::enum_name(name);
  }
}
