// `simulate --pp`: the static 3D mesh, DP-Balance and PP-Balance over
// pipelines on the same batches (plan/simulate/simulate_pipeline.hpp).
#include "plan/simulate/simulate_pipeline.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "plan/cost/device_memory.hpp"
#include "plan/model_shape.hpp"
#include "plan/pipeline/pp_balance.hpp"
#include "tests/plan/plan_test_util.hpp"

using namespace meshloom;
using namespace meshloom::plan;

namespace {

// LLaMA-7B on 64 GPUs, TP 2, pp 2: 16 pipelines of C = 8K.
struct Small {
  SimulateSpec spec;
  model::Shape shape = model_shape("llama-7b");
  CostModel cost;
  PipelineFit fit;
  PipelineModel model;
  PlannerOptions options;
  Small() {
    spec.model = "llama-7b";
    spec.gpus = 64;
    spec.tp = 2;
    spec.capacity = 8192;
    spec.context = 64 * 1024;
    spec.batch = 1024 * 1024;
    cost = CostModel::from_shape(shape, trainer_hardware(spec));
    fit = pipeline_fit(spec, shape, cost, 2);
    model = pipeline_model(shape, cost, fit.stage_layers);
    options.trainers = fit.pipelines;
    options.capacity = fit.capacity;
    options.seq_len_max = spec.context;
  }
  std::vector<int64_t> batch(const std::string& dist, uint64_t seed) const {
    return draw_batch(LengthSampler::named(dist), spec.batch, spec.context, seed);
  }
};

}  // namespace

TEST(SimulatePipeline, EverySequenceIsPlacedOnceInEverySetup) {
  const Small s;
  EXPECT_EQ(s.fit.pipelines, 16);
  for (const char* dist : {"byted", "github"})
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      const std::vector<int64_t> lengths = s.batch(dist, seed);
      ASSERT_TRUE(std::any_of(lengths.begin(), lengths.end(), [](int64_t L) { return L > 8192; }))
          << "the batch should hold sequences to split";
      for (auto fn : {static_pipelines, dp_balance_pipelines, pp_balance_pipelines}) {
        const PipelineStep st = fn(lengths, s.options, s.cost, s.model);
        EXPECT_EQ(st.placed, lengths) << st.setup << " " << dist << " seed " << seed;
        EXPECT_EQ(st.timing.size(), 16u) << st.setup;
        const int32_t total = std::accumulate(st.micro_batch.begin(), st.micro_batch.end(), 0);
        EXPECT_GT(total, 0) << st.setup;
        EXPECT_GT(st.makespan(), 0) << st.setup;
        EXPECT_GE(st.idle(2), 0.0) << st.setup;
        EXPECT_LT(st.idle(2), 1.0) << st.setup;
      }
    }
}

TEST(SimulatePipeline, TheStaticMeshRunsEqualMicroBatchCounts) {
  const Small s;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    const PipelineStep st = static_pipelines(s.batch("byted", seed), s.options, s.cost, s.model);
    ASSERT_EQ(st.static_cp, 8);  // 64K / 8K; DP 2
    EXPECT_LE(st.most() - st.fewest(), 1) << "seed " << seed;
    // The CP pipelines of one DP rank run in lock step.
    for (int32_t p = 0; p < 16; ++p)
      EXPECT_EQ(st.timing[size_t(p)].makespan, st.timing[size_t(p / 8 * 8)].makespan);
  }
}

TEST(SimulatePipeline, PpBalanceOfShortSequencesIsPpBalanceItselfOrHdp) {
  // Nothing longer than C: no rings, every pipeline takes short ones, and the
  // step is never above PP-Balance's runs of whole micro-batches, which are
  // never above round-robin's (the plan takes the better of those, by
  // sequence, and hdp's: pp_plan.hpp).
  const Small s;
  Rng rng(7);
  int own = 0;
  for (int trial = 0; trial < 6; ++trial) {
    std::vector<int64_t> lengths;
    for (int i = 0; i < 300; ++i)  // skewed: mostly short, some near C
      lengths.push_back(rng.uniform() < 0.85 ? 64 + int64_t(rng.below(1024))
                                             : 4096 + int64_t(rng.below(4097)));
    const PipelineStep st = pp_balance_pipelines(lengths, s.options, s.cost, s.model);
    EXPECT_EQ(st.short_pipelines, 16);
    const PipelineBalanceOptions po{16, s.options.capacity, s.options.slack, {}};
    const PipelineBatch balanced = pp_balance(lengths, po, s.model);
    int32_t fewest = balanced.micro_batches_of(0), most = fewest;
    for (int32_t p = 1; p < balanced.pipelines(); ++p) {
      fewest = std::min(fewest, balanced.micro_batches_of(p));
      most = std::max(most, balanced.micro_batches_of(p));
    }
    EXPECT_GT(most, fewest) << "PP-Balance: cheaper pipelines run more micro-batches";
    const double alone = balanced.makespan();
    EXPECT_LE(alone, pp_round_robin(lengths, po, s.model).makespan() * (1 + 1e-12));
    // PP-Balance's better placement (runs or by sequence), or hdp's.
    EXPECT_LE(st.makespan(), alone * (1 + 1e-9));
    own += !st.hdp_placement;
  }
  std::printf("PP-Balance's own plan on %d of 6 batches, hdp's on the others\n", own);
}

TEST(SimulatePipeline, APipelineLoadCostsWhatThePlanPredicts) {
  // Summed over the stages, a micro-batch's load costs its predicted time
  // in the plan (ring included) plus the embedding's small share.
  const Small s;
  const std::vector<int64_t> lengths = s.batch("byted", 2);
  const Plan p = plan_step({config::Planner::bytescale}, lengths, s.options, s.cost);
  int rings = 0;
  for (int32_t t = 0; t < p.trainers; ++t)
    for (const MicroBatch& mb : p.micro_batches_of(t)) {
      const MicroBatchLoad m = pipeline_load(p, mb, s.cost);
      const std::vector<double> st = stage_seconds(s.model, m);
      const double sum = std::accumulate(st.begin(), st.end(), 0.0);
      const double planned = double(mb.end) - double(mb.start);
      EXPECT_NEAR(sum, planned, 2e-3 * planned + 1e-6);
      rings += p.group_size(p.pieces_of(mb)[0].seq) > 1;
    }
  EXPECT_GT(rings, 0);
}

TEST(SimulatePipeline, StageZeroHoldsPpMicroBatchesOfActivations) {
  DeviceMemoryInput in;
  in.shape = model_shape("llama-7b");
  in.tokens = 4096;
  const DeviceMemory one = device_memory(in);
  in.in_flight = 4;
  const DeviceMemory four = device_memory(in);
  EXPECT_EQ(four.activations, 4 * one.activations);
  EXPECT_EQ(four.total() - one.total(), 3 * one.activations);
}

namespace {

// ByteScale's 70B setting: LLaMA-70B on 8,192 GPUs at TP 8, C from memory.
SimulateSpec llama70b_on_8k_gpus() {
  SimulateSpec spec;
  spec.model = "llama-70b";
  spec.gpus = 8192;
  spec.tp = 8;
  spec.capacity = 0;
  return spec;
}

}  // namespace

TEST(SimulatePipeline, Llama70bOn8kGpusNeedsPipelines) {
  // At TP 8 alone the model state leaves too little for the 2M context; the
  // PP degree used is the smallest that fits.
  SimulateSpec spec = llama70b_on_8k_gpus();
  const model::Shape shape = model_shape("llama-70b");
  const CostModel cost = CostModel::from_shape(shape, trainer_hardware(spec));
  const std::vector<int> pps = pp_candidates(spec, shape);
  EXPECT_EQ(pps, (std::vector<int>{1, 2, 4, 8, 16}));
  const PipelineFit one = pipeline_fit(spec, shape, cost, 1);
  EXPECT_FALSE(one.fits());
  int first = 0;
  for (int pp : pps) {
    const PipelineFit f = pipeline_fit(spec, shape, cost, pp);
    EXPECT_EQ(std::accumulate(f.stage_layers.begin(), f.stage_layers.end(), 0), 80);
    EXPECT_EQ(f.pipelines, 1024 / pp);
    if (f.fits() && first == 0) first = pp;
  }
  ASSERT_GT(first, 1);
  spec.steps = 1;
  spec.batch = 4 * 1024 * 1024;  // small: the test only checks the choice
  spec.planners = {};
  const PipeSimResult r = simulate_pipelines(spec, LengthSampler::named("github"), 0);
  EXPECT_EQ(r.fit.pp, first);
  EXPECT_TRUE(r.pp_auto);
  EXPECT_THROW(simulate_pipelines(spec, LengthSampler::named("github"), 1), Error);
}

TEST(SimulatePipeline, PpBalanceCountsItsRingsWaitsAt70bScale) {
  // ByteScale's setting on GitHub lengths (bench_pp_simulate.sh's first
  // rows): rings span up to all 512 pipelines and wait for their slowest
  // members. PP-Balance ran no faster than DP-Balance while it took each
  // pipeline's rings as ending when their own work did; counting the waits
  // it is ahead.
  SimulateSpec spec = llama70b_on_8k_gpus();
  spec.context = 2 << 20;
  spec.batch = 32 << 20;
  spec.steps = 8;
  const PipeSimResult r = simulate_pipelines(spec, LengthSampler::named("github"), 2);
  ASSERT_EQ(r.rows.size(), 3u);
  const PipeSimRow &dp = r.rows[1], &pp = r.rows[2];
  ASSERT_EQ(dp.setup, "dp-balance");
  ASSERT_EQ(pp.setup, "pp-balance");
  EXPECT_LT(pp.step_s, dp.step_s * 0.95);
  EXPECT_LT(pp.idle, dp.idle);
}

TEST(SimulatePipeline, ReportAndCsv) {
  Small s;
  s.spec.steps = 2;
  const PipeSimResult r = simulate_pipelines(s.spec, LengthSampler::named("github"), 2);
  ASSERT_EQ(r.rows.size(), 3u);
  for (const PipeSimRow& row : r.rows) {
    EXPECT_EQ(row.error, "") << row.setup;
    EXPECT_GT(row.step_s, 0) << row.setup;
  }
  const std::string report = pipeline_report(r);
  EXPECT_NE(report.find("| static (CP 8 x DP 2) |"), std::string::npos) << report;
  EXPECT_NE(report.find("| pp-balance"), std::string::npos) << report;
  EXPECT_NE(report.find("| 2 (used) | 16 |"), std::string::npos) << report;
  const std::string csv = pipeline_csv_rows(r);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3);
  const std::string header = pipeline_csv_header();
  EXPECT_EQ(std::count(header.begin(), header.end(), ','),
            std::count(csv.begin(), csv.begin() + csv.find('\n'), ','));
  EXPECT_THROW(simulate_pipelines(s.spec, LengthSampler::named("github"), 3), Error);  // 64 % 6
}
