// PP-Balance as a Plan: `plan.balance: pp`.
//
// Every trainer of the Plan (an HDP rank) is a pipeline of pp stages that
// runs its micro-batch list 1F1B; pp_balance (pp_balance.hpp) shares whole
// sequences out over those pipelines. It takes sequences of at most C, so
// pp_balance_plan works in two phases:
//  1. Rings. The hdp planner (plan_hdp, without its static fallback) plans
//     the whole batch over all HDP ranks; its micro-batches that hold a
//     sequence longer than C (rings, and with offloading the odd long
//     sequence run whole) are kept as they are, with their CP groups,
//     offload ratios and order, first in every trainer's list. hdp sees the
//     whole batch so that it widens rings only as far as the step's total
//     work asks (planned alone, rings would be spread over every rank).
//  2. Whole sequences. The rest (all within C) go to pp_balance (or, on
//     small batches where that is predicted faster, pp_balance_by_sequence)
//     instead of where hdp put them, each pipeline starting with a load: the
//     predicted makespan of its kept micro-batches, all pipelines' rings run
//     together (pipeline_times: a ring waits for its slowest member at
//     every stage; its exposed traffic counts through pipeline_load). The
//     two phases are added, not overlapped. A pipeline busy with rings, or
//     waiting for them, takes fewer whole micro-batches, or none.
// The Plan's micro-batches are pp_balance's (k = 1, up to C tokens, in its
// order) after the rings; predicted times are the cost model's serial ones
// (Plan::retime), not the pipelines' 1F1B. Each ring's CP algorithm is then
// chosen as plan_step does (options.cp_algorithm, cp_algorithm.hpp). The
// runtime runs the lists with pipeline_slots.hpp, so rings at different list
// indices cannot deadlock.
#pragma once

#include <cstdint>
#include <vector>

#include "config/config.hpp"
#include "model/shape.hpp"
#include "plan/pipeline/pipeline.hpp"
#include "plan/planner.hpp"

namespace meshloom::plan {

// The stages of one HDP rank as a pipeline of `pp`: layers split by
// balance_stages for micro-batches of C tokens (as `meshloom plan --pp`).
PipelineModel balanced_pipeline(const model::Shape& shape, const CostModel& cost, int pp,
                                int64_t capacity);

// Plans one step with PP-Balance on options.trainers pipelines of `model`
// (planner name "pp-balance"). Throws Error as plan_step does.
Plan pp_balance_plan(const std::vector<int64_t>& lengths, const PlannerOptions& options,
                     const CostModel& cost, const PipelineModel& model);

// The slowest pipeline's predicted 1F1B makespan (pipeline_times).
double slowest_pipeline(const Plan& plan, const PipelineModel& model, const CostModel& cost);

// plan.balance: pp as the runtime plans a step: pp_balance_plan, or hdp's
// plan (plan_step, planner hdp) where its slowest pipeline is predicted
// strictly faster. PP-Balance hands out whole micro-batches, in runs of its
// length-sorted list; with a few micro-batches a pipeline that is too coarse
// to balance, and hdp's placement by sequence wins (2026-11-26: 3-15%
// faster at 4-8 micro-batches a pipeline, docs/performance.md). A portfolio,
// as hdp's own with Alg. 2: plan.balance: pp is never predicted slower than
// hdp.
Plan pp_step_plan(const std::vector<int64_t>& lengths, const PlannerOptions& options,
                  const CostModel& cost, const PipelineModel& pipeline);

}  // namespace meshloom::plan
