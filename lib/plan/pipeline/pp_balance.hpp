// PP-Balance: ByteScale's balance scheduler (Alg. 2) for pipelines, the
// planning half. D pipelines (HDP ranks, each pp stages) share a
// global batch; a pipeline runs its micro-batches 1F1B (pipeline_schedule.hpp)
// and pipelines may run different numbers of them.
//
// ByteScale's Insight 1: with pipelines a DP imbalance is paid once per
// stage, so put sequences of similar length in the same pipeline and give
// the pipelines with cheaper micro-batches more of them (its Fig. 12: 8
// micro-batches on one pipeline, 18 on another). As we read Alg. 2's PP
// variant ("picks sequentially across all buckets"):
//  1. Sort the sequences longest first and cut them into D buckets of equal
//     work (long buckets hold fewer sequences).
//  2. Pack each bucket, in order, first fit into micro-batches of at most C
//     tokens: a micro-batch holds lengths of one bucket, so similar ones.
//  3. Fill pipelines from that list in order, pipeline 0 first: each takes
//     micro-batches while its predicted 1F1B makespan (warm-up and cool-down
//     bubbles included, messages too) stays within a target; the least
//     target that places every micro-batch is found by bisection, stopped
//     once it is within the slack delta of a target known too small (delta
//     plays Alg. 2's role: how far a pipeline may lag the slowest).
// Pipeline 0 thus runs few costly micro-batches, the last ones many cheap
// ones. A pipeline may be left empty when the batch is too small to share.
//
// Sequences must fit in C (a longer one is split by HDP into ring pieces
// that couple pipelines stage by stage; pp_plan.hpp plans those first and
// passes what they cost each pipeline as its starting load, `start`: the
// pipeline then fills only target - start[p], and a pipeline whose start
// already reaches the target takes nothing).
//
// pp_round_robin is the naive baseline: sequences in batch order packed next
// fit into micro-batches of C tokens, dealt out one each in turn, so every
// pipeline runs the same number (+-1), as a static mesh (it ignores start).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan/pipeline/pipeline.hpp"
#include "plan/pipeline/pipeline_schedule.hpp"

namespace meshloom::plan {

struct PipelineBalanceOptions {
  int32_t pipelines = 1;    // D
  int64_t capacity = 4096;  // C: tokens of one micro-batch
  double slack = 0.02;      // delta, relative
  // pp_balance and pp_balance_by_sequence, per pipeline: seconds it is busy
  // before its first micro-batch here (empty: none). PipelineBatch's
  // timings exclude it.
  std::vector<double> start;
};

// One step's micro-batches on D pipelines, and their predicted timing.
struct PipelineBatch {
  std::string scheduler;                            // "pp-balance", "round-robin"
  std::vector<std::vector<int32_t>> micro_batches;  // sequence ids, in run order per pipeline
  std::vector<int32_t> pipeline_begin;              // D + 1 offsets into micro_batches
  std::vector<PipeTiming> timing;                   // per pipeline, 1F1B

  int32_t pipelines() const { return int32_t(timing.size()); }
  int32_t micro_batches_of(int32_t p) const { return pipeline_begin[p + 1] - pipeline_begin[p]; }
  double time(int32_t p) const { return timing[p].makespan; }
  double makespan() const;  // the step: the slowest pipeline
  // The slowest pipeline with its starting load (PipelineBalanceOptions::start).
  double makespan(const std::vector<double>& start) const;
};

PipelineBatch pp_balance(const std::vector<int64_t>& lengths, const PipelineBalanceOptions& options,
                         const PipelineModel& model);
// PP-Balance by sequence, for batches too small to balance in whole
// micro-batches: longest first, each sequence goes to the pipeline (first
// fit into its micro-batches) whose predicted 1F1B makespan after taking it,
// `start` included, is least, so long sequences gather where their bubbles
// are paid anyway. It simulates every pipeline for every sequence: n x D
// simulations (pp_plan.hpp runs it only on small batches).
PipelineBatch pp_balance_by_sequence(const std::vector<int64_t>& lengths,
                                     const PipelineBalanceOptions& options,
                                     const PipelineModel& model);
PipelineBatch pp_round_robin(const std::vector<int64_t>& lengths,
                             const PipelineBalanceOptions& options, const PipelineModel& model);

// "" when every sequence sits in exactly one micro-batch, no micro-batch is
// empty or holds more than C tokens, and the offsets cover D pipelines.
std::string check_pipeline_batch(const PipelineBatch& batch, const std::vector<int64_t>& lengths,
                                 const PipelineBalanceOptions& options);

}  // namespace meshloom::plan
