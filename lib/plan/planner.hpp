// The planning entry point: a step's sequence lengths in, a Plan out.
//
// Rank 0 calls plan_step() once per step with the manifest's lengths (a plain
// vector, in manifest order; Plan sequence i is lengths[i]) and sends each
// constructor its part (roles/step_placer.cpp); the plan and simulate
// commands call it too. Planners:
//   hdp        meshloom's HDP planner: ByteScale's dynamic mesh, balanced by
//              LPT, gap filling and local search (hdp_planner.hpp); with
//              static_fallback, the static grid's plan where that is faster
//   bytescale  ByteScale's balance scheduler, Alg. 2 DP-Balance, as published
//   naive      ByteScale's Alg. 1: HDP without balancing (equal tokens)
//   static     the fixed DP x CP grid baseline (static_planner.hpp)
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "plan/cost/cost_model.hpp"
#include "plan/plan.hpp"

namespace meshloom::plan {

struct PipelineModel;  // pipeline/pipeline.hpp

struct PlannerOptions {
  int32_t trainers = 1;
  int64_t capacity = 4096;  // C: tokens one trainer holds in a micro-batch
  double slack = 0.02;      // delta: relative lag the balance scheduler tolerates
  bool offload = false;     // selective activation offloading of long sequences
  // Static grid: the longest sequence the run allows (data.seq_len); sets CP.
  // 0: the longest sequence of the batch.
  int64_t seq_len_max = 0;
  // hdp only: widen a split sequence's group beyond the minimum when that
  // sequence alone would set the step time (never a sequence that fits in C).
  bool widen = true;
  // hdp only: local search moves after LPT (-1: 4 x trainers, 0: none).
  int64_t search_moves = -1;
  // hdp only: also plan the static grid for the same lengths and options and
  // return it (still named "hdp", Plan::static_fallback() true) when its
  // predicted step is shorter; ties and batches the grid cannot hold keep
  // HDP's own plan. Then hdp is never slower than static, but a sequence
  // that fits in C may be split (off: ByteScale's data-aware sharding).
  bool static_fallback = false;
  // How split sequences run attention (cp_algorithm.hpp), chosen after the
  // planner formed the groups; ring by default.
  config::CpAlgorithm cp_algorithm = config::CpAlgorithm::ring;
};

std::vector<config::Planner> all_planners();  // hdp, bytescale, naive, static

// How a step is planned: the planner, and how the step is balanced. With
// balance pp every HDP rank is a pipeline of `pipeline`'s stages (PP-Balance,
// pipeline/pp_plan.hpp; `planner` is then not read, as hdp's plan is the one
// PP-Balance competes with).
struct StepPlanner {
  config::Planner planner = config::Planner::hdp;
  config::Balance balance = config::Balance::dp;
  const PipelineModel* pipeline = nullptr;  // balance pp only
};

// Plans one step: the one planning entry point. Throws meshloom::Error when
// the batch cannot be planned (a sequence needs more trainers than exist, or
// exceeds seq_len_max for static). Sets plan.planning_seconds (for hdp with
// static_fallback, the static grid's planning included), then each group's
// CP algorithm (options.cp_algorithm, choose_cp_algorithms; its time
// included).
Plan plan_step(const StepPlanner& how, const std::vector<int64_t>& lengths,
               const PlannerOptions& options, const CostModel& cost);
// What plan_step checks first: throws Error unless trainers >= 1,
// capacity >= 1, 0 <= slack < 1 and every length >= 1.
void check_plan_inputs(const std::vector<int64_t>& lengths, const PlannerOptions& options);

// The least step time any HDP plan of these lengths could reach under the
// cost model: the largest of
//   total compute / T            (perfect balance, communication free),
//   the costliest sequence that fits in C, run whole (never split),
//   the fastest ring the longest sequence can run at any width 1..min(T, L)
//     (from some width on, its K/V traffic and not its attention sets the
//     member time; assumes the faster intra-node link where a ring could
//     fit in one node; with cp_algorithm other than ring, the fastest of
//     the allowed Ulysses degrees, least_cp_seconds).
// The longest sequence bounds every other ring, as that time grows with L.
struct IdealBound {
  double balanced = 0;
  double largest_whole = 0;
  double fastest_ring = 0;
  double value() const { return std::max({balanced, largest_whole, fastest_ring}); }
};
IdealBound ideal_bound(const std::vector<int64_t>& lengths, const PlannerOptions& options,
                       const CostModel& cost);
inline double ideal_step_time(const std::vector<int64_t>& lengths, const PlannerOptions& options,
                              const CostModel& cost) {
  return ideal_bound(lengths, options, cost).value();
}

PlannerOptions options_from_config(const config::PlanConfig& plan, int32_t trainers,
                                   int64_t seq_len_max);

// The fewest trainers a sequence of L tokens needs, and its offload ratio r:
// without offloading ceil(L / C) and 0; with it, ByteScale eq. 3: the
// smallest D such that some r in [0, 1] gives every member at most C
// resident tokens, ceil(L/D) x (2 + (1-r)(l-2)) / l <= C, the copy of r
// of the member's activations hides under its compute, and fits in the
// trainer's pinned host memory.
struct Split {
  int32_t k = 1;
  float ratio = 0;
};
Split min_split(int64_t length, const PlannerOptions& options, const CostModel& cost);
// The offload ratio a k-way split of L tokens needs (0 when it fits in C).
float offload_ratio_for(int64_t length, int32_t k, int64_t capacity, const CostModel& cost);

}  // namespace meshloom::plan
