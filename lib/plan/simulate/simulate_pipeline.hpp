// `meshloom simulate --pp N`: the same batches on HDP ranks that
// are pipelines of pp stages (each stage a TP group), under three setups:
//
//   static       the fixed DP x CP grid (static_planner.hpp) over the
//                pipelines: CP from the context and C, every sequence split
//                CP ways; the grid's packed micro-batches dealt to the DP
//                ranks longest first in a snake, so every pipeline runs the
//                same number of them (+-1 where the count does not divide),
//                1F1B. The CP pipelines of a DP rank run the same list in
//                lock step.
//   dp-balance   HDP with ByteScale's Alg. 2 DP-Balance (planner
//                "bytescale") deciding each HDP rank's micro-batches; each
//                rank's list runs as a 1F1B pipeline.
//   pp-balance   the runtime's plan.balance: pp (pp_balance_plan in
//                pp_plan.hpp): hdp's rings of the sequences longer than C
//                first, then PP-Balance of the rest with each pipeline's
//                ring time as its starting load; each pipeline runs its rings
//                and then its short micro-batches 1F1B.
// The step is the slowest pipeline.
//
// A micro-batch of a plan becomes a pipeline load (pipeline_load,
// pipeline_schedule.hpp); HDP setups run their pipelines together as the
// runtime does (pipeline_timings, pipeline_slots.hpp): a ring's members
// wait for each other stage by stage, and the static grid's DP ranks run in
// lock step by construction.
//
// The PP degree, when not given, follows from memory (pipeline_fit): stage s
// of a 1F1B pipeline holds its layers' weights, gradients and ZeRO-1 share
// (over the HDP ranks) and the activations of pp - s micro-batches of C
// tokens (plan/cost/device_memory.hpp, every stage counted with the embedding
// and LM head: conservative by a few hundred MB at TP 8). So C does not grow
// with pp once the state is small, while the HDP ranks shrink as 1/pp: the
// smallest pp at which the static grid can hold the longest sequence is
// the one taken.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/shape.hpp"
#include "plan/cost/cost_model.hpp"
#include "plan/io/lengths.hpp"
#include "plan/pipeline/pipeline.hpp"
#include "plan/pipeline/pipeline_schedule.hpp"
#include "plan/plan.hpp"
#include "plan/planner.hpp"
#include "plan/simulate/simulate.hpp"

namespace meshloom::plan {

// One PP degree on the spec's GPUs: what fits, and why (not).
struct PipelineFit {
  int pp = 1;
  int32_t pipelines = 0;          // HDP ranks: gpus / (tp x pp)
  std::vector<int> stage_layers;  // by the cost model (balance_stages)
  int64_t capacity = 0;           // C per pipeline (0: the state does not fit)
  int32_t static_cp = 0;          // the static grid's CP (0: it cannot hold the context)
  std::string why;                // "" when it fits
  bool fits() const { return why.empty(); }
};
// C is spec.capacity, or with spec.capacity 0 the least over stages of what
// fits kUsableGpuMemory of the GPU (see above), rounded down to 1K.
PipelineFit pipeline_fit(const SimulateSpec& spec, const model::Shape& shape, const CostModel& cost,
                         int pp);
// The PP degrees worth listing: powers of two up to 16 that divide gpus / tp
// and are at most the layers.
std::vector<int> pp_candidates(const SimulateSpec& spec, const model::Shape& shape);

// One setup on one batch.
struct PipelineStep {
  std::string setup;                 // "static", "dp-balance", "pp-balance"
  std::vector<PipeTiming> timing;    // per pipeline
  std::vector<int32_t> micro_batch;  // per pipeline: how many it runs
  std::vector<int64_t> placed;       // per sequence: its tokens placed (members summed)
  int32_t static_cp = 0;
  int32_t short_pipelines = 0;  // pp-balance: the pipelines that got short sequences
  bool hdp_placement = false;   // pp-balance: pp_step_plan took hdp's plan
  double makespan() const;
  double bubble() const;      // mean own bubble of the pipelines that run anything
  double idle(int pp) const;  // 1 - busy / (pipelines x pp x step)
  int32_t fewest() const;     // micro-batches of the least busy pipeline
  int32_t most() const;
};

// `options.trainers` is the number of pipelines, `options.capacity` C.
PipelineStep static_pipelines(const std::vector<int64_t>& lengths, const PlannerOptions& options,
                              const CostModel& cost, const PipelineModel& model);
PipelineStep dp_balance_pipelines(const std::vector<int64_t>& lengths,
                                  const PlannerOptions& options, const CostModel& cost,
                                  const PipelineModel& model);
PipelineStep pp_balance_pipelines(const std::vector<int64_t>& lengths,
                                  const PlannerOptions& options, const CostModel& cost,
                                  const PipelineModel& model);

struct PipeSimRow {
  std::string setup;
  double step_s = 0;  // means over steps
  double bubble = 0;
  double idle = 0;
  int32_t mb_min = 0, mb_max = 0;
  int32_t static_cp = 0;
  double short_pipelines = 0;
  double hdp_share = 0;  // pp-balance: the share of steps that took hdp's plan
  std::string error;
};

struct PipeSimResult {
  SimulateSpec spec;  // with the capacity used
  bool capacity_auto = false;
  bool pp_auto = false;
  model::Shape shape;
  CostModel cost;
  PipelineFit fit;                      // the PP degree used
  std::vector<PipelineFit> candidates;  // what the others would give
  std::string distribution;
  double sequences = 0;       // per step, mean
  double long_sequences = 0;  // longer than C, per step, mean
  double long_tokens = 0;     // their share of the tokens
  std::vector<PipeSimRow> rows;
  const PipeSimRow* row(const std::string& setup) const;
};

// pp 0: the smallest candidate that fits (pipeline_fit). Throws Error when
// the one asked for (or every candidate) does not fit.
PipeSimResult simulate_pipelines(const SimulateSpec& spec, const LengthSampler& lengths, int pp);
std::string pipeline_report(const PipeSimResult& result);
std::string pipeline_csv_header();
std::string pipeline_csv_rows(const PipeSimResult& result);

}  // namespace meshloom::plan
