// The simulator: every planner on the same batches, HDP ahead of the grid.
#include "plan/simulate/simulate.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "plan/cost/device_memory.hpp"
#include "plan/model_shape.hpp"

using namespace meshloom;
using namespace meshloom::plan;

TEST(Simulate, HdpBeatsTheStaticGridOnLongTailedBatches) {
  SimulateSpec s;
  s.model = "llama-7b";
  s.gpus = 256;
  s.tp = 2;
  s.context = 512 * 1024;
  s.batch = 4 * 1024 * 1024;
  s.capacity = 8192;
  s.steps = 2;
  const SimResult r = simulate(s, LengthSampler::named("byted"));
  EXPECT_EQ(r.trainers, 128);
  ASSERT_EQ(r.rows.size(), 4u);
  for (const SimRow& row : r.rows) {
    EXPECT_EQ(row.error, "") << config::enum_name(row.planner);
    EXPECT_GT(row.step_s, 0) << config::enum_name(row.planner);
    EXPECT_GE(row.ideal, 1.0 - 1e-9) << config::enum_name(row.planner);
    EXPECT_EQ(row.planning.size(), 2u);
  }
  const SimRow* grid = r.row(config::Planner::static_grid);
  const SimRow* hdp = r.row(config::Planner::hdp);
  const SimRow* bs = r.row(config::Planner::bytescale);
  EXPECT_EQ(grid->static_cp, 64);  // 512K / 8K
  EXPECT_LT(hdp->step_s, 0.7 * grid->step_s);
  EXPECT_LE(hdp->step_s, bs->step_s * 1.001);
  EXPECT_LT(hdp->comm_bytes, grid->comm_bytes);
  EXPECT_LT(hdp->imbalance, 1.05);
  const std::string report = simulate_report(r);
  EXPECT_NE(report.find("| hdp |"), std::string::npos);
  EXPECT_NE(report.find("static (CP 64 x DP 2)"), std::string::npos);
  const std::string csv = simulate_csv_rows(r);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 4);
  const std::string header = simulate_csv_header();
  EXPECT_EQ(std::count(header.begin(), header.end(), ','),
            std::count(csv.begin(), csv.begin() + csv.find('\n'), ','));
}

TEST(Simulate, ReportsWhatAPlannerCannotPlan) {
  SimulateSpec s;
  s.gpus = 8;
  s.context = 1024 * 1024;  // needs CP 128 at 8K: more than 8 trainers
  s.batch = 64 * 1024;
  const LengthSampler fixed = LengthSampler::named("fixed:4K");
  const SimResult r = simulate(s, fixed);
  EXPECT_NE(r.row(config::Planner::static_grid)->error.find("static grid"), std::string::npos);
  EXPECT_EQ(r.row(config::Planner::hdp)->error, "");
  EXPECT_THROW(
      {
        SimulateSpec bad = s;
        bad.tp = 3;
        simulate(bad, fixed);
      },
      Error);
}

TEST(Simulate, StaticFallbackTakesTheGridOnACoarseBatch) {
  // One 4C sequence and two of C on 4 trainers: the grid splits all three
  // over the 4 trainers; HDP keeps each C sequence whole after the 4C ring.
  const LengthSampler coarse = LengthSampler::empirical({32768, 8192, 8192}, "coarse");
  SimulateSpec s;
  s.gpus = 4;
  s.capacity = 8192;
  s.context = 32768;
  s.batch = 49152;
  s.planners = {config::Planner::static_grid, config::Planner::hdp};
  const SimResult plain = simulate(s, coarse);
  s.static_fallback = true;
  const SimResult fallback = simulate(s, coarse);
  const double grid = plain.row(config::Planner::static_grid)->step_s;
  EXPECT_GT(plain.row(config::Planner::hdp)->step_s, 1.1 * grid);
  EXPECT_EQ(plain.row(config::Planner::hdp)->static_cp, 0);
  EXPECT_DOUBLE_EQ(fallback.row(config::Planner::hdp)->step_s,
                   fallback.row(config::Planner::static_grid)->step_s);
  EXPECT_EQ(fallback.row(config::Planner::hdp)->static_cp, 4);
  EXPECT_NE(simulate_report(fallback).find("hdp (static fallback: CP 4 x DP 1)"),
            std::string::npos);
}

// --capacity auto: the most tokens that fit (one more 1K block does not),
// more with each doubling of TP (sharded weights, gradients, logits and
// head-split activations), and a clear error when nothing fits.
TEST(Simulate, AutoCapacityIsWhatFitsTheGpuAndGrowsWithTp) {
  const model::Shape shape = model_shape("llama-7b");
  SimulateSpec s;
  s.gpus = 1024;
  int64_t before = 0;
  for (int tp : {1, 2, 4, 8}) {
    s.tp = tp;
    const int64_t c = capacity_auto(s, shape);
    DeviceMemoryInput in;
    in.shape = shape;
    in.tp = tp;
    in.trainers = s.gpus / tp;
    in.zero1 = in.rings = in.nccl = true;
    in.tokens = c;
    EXPECT_LE(double(device_memory(in).total()), kUsableGpuMemory * s.gpu_memory) << tp;
    in.tokens = c + 1024;
    EXPECT_GT(double(device_memory(in).total()), kUsableGpuMemory * s.gpu_memory) << tp;
    EXPECT_EQ(c % 1024, 0) << tp;
    EXPECT_GT(c, before) << tp;
    before = c;
  }
  s.tp = 1;
  s.gpu_memory = 20e9;  // less than LLaMA-7B's bf16 weights and fp32 gradients
  try {
    capacity_auto(s, shape);
    ADD_FAILURE() << "no error for a model that cannot fit";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--gpu-memory"), std::string::npos) << e.what();
  }
  // simulate() uses it for capacity 0 and says so.
  s.gpus = 64;
  s.tp = 8;
  s.gpu_memory = 80e9;
  s.capacity = 0;
  s.planners = {config::Planner::hdp};
  const SimResult r = simulate(s, LengthSampler::empirical({65536, 4096, 4096}, "few"));
  EXPECT_TRUE(r.capacity_auto);
  EXPECT_EQ(r.spec.capacity, capacity_auto(s, shape));
  EXPECT_NE(simulate_report(r).find("auto: what fits"), std::string::npos);
}
