// Pipeline slots: the 1F1B order of pipelines that CP rings couple.
//
// Each trainer of a Plan (an HDP rank) is a pipeline of pp stages that runs
// its micro-batch list 1F1B (pipeline_schedule.hpp). A ring micro-batch
// (group size k > 1) couples its members' pipelines: at every stage s the
// members' stage-s ranks run F(ring) together and B(ring) together, a
// blocking collective. 1F1B orders a stage's ops by list index: with warm-up
// w = pp - s - 1, F(j) runs before B(i) iff j <= w + i. Two pipelines that
// hold a ring at different indices can therefore order its ops differently
// against another ring they share, and deadlock. Example, pp = 2, rings R and
// Q on trainers x and y, a whole micro-batch A between them on y only:
//   x: [R, Q]      stage 0 runs F(R) F(Q) B(R) B(Q)
//   y: [R, A, Q]   stage 0 runs F(R) F(A) B(R) F(Q) B(A) B(Q)
// x's stage 0 waits in F(Q) for y's, y's waits in B(R) for x's.
//
// The fix: give every micro-batch a slot, a virtual index, with a ring in the
// SAME slot on every member; a pipeline runs 1F1B over slots 0..S-1 (S: its
// last slot + 1) and skips the empty ones (no compute, no message). Above, R
// gets slot 0, A slot 1, Q slot 2 on both, so x's stage 0 runs F(R) B(R) F(Q)
// B(Q). Slots are handed out walking the micro-batches in a global order that
// every trainer's list follows (validate() guarantees one exists): a whole
// micro-batch takes its trainer's next free slot; a ring takes the largest
// next free slot of its members, and every member's next free slot becomes
// that + 1. Slots thus increase along each list, and empty slots only appear
// where a pipeline waits for a ring anyway.
//
// Why this cannot deadlock. Give stage s's ops of slot j the potential
//   phi(F, j) = s + 2j,   phi(B, j) = 2pp - 1 - s + 2j.
// Along each stage's 1F1B list phi strictly increases: F(j) before B(i) iff
// j <= w + i iff s + 2j < 2pp - 1 - s + 2i (the two differ in parity, so
// never tie), and a list with empty slots skipped is a subsequence of the
// full one. Every dependency also increases it: F(j) on s - 1 -> F(j) on s
// (+1), B(j) on s + 1 -> B(j) on s (+1), F(j) -> B(j) on one stage
// (2pp - 1 - 2s > 0). A ring's ops share (stage, kind, slot) on every member,
// hence one phi. So every wait points to a strictly smaller phi: no cycle, no
// deadlock, for any pp, any slot counts (S < w or not) and any rings.
// Point-to-point messages match in order too: every stage runs its forwards,
// and its backwards, in slot order, the order its neighbour takes them.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "plan/pipeline/pipeline_schedule.hpp"
#include "plan/plan.hpp"

namespace meshloom::plan {

struct PipelineSlots {
  std::vector<int32_t> slot;   // per plan.micro_batches entry
  std::vector<int32_t> slots;  // per trainer: S, its last slot + 1 (0: no micro-batch)
};

// Slots of every micro-batch of a plan whose ring order is valid (throws
// Error naming the stuck trainer otherwise).
PipelineSlots pipeline_slots(const Plan& plan);

// 1F1B of one pipeline over its occupied slots (strictly increasing):
// one_f_one_b(pp, S) with the ops of empty slots removed. PipeOp::micro_batch
// is the index into `slots`, i.e. the micro-batch's index in the pipeline's
// list, so the schedule simulates like any other (simulate_pipeline).
PipeSchedule one_f_one_b_slots(int pp, std::span<const int32_t> slots);
// The schedule of `trainer`'s pipeline.
PipeSchedule pipeline_schedule(const Plan& plan, const PipelineSlots& slots, int32_t trainer,
                               int pp);

// Runs every pipeline's schedule (schedules[t]: trainer t's, pp stages each,
// PipeOp::micro_batch an index into its list) in process, without timing:
// each (pipeline, stage) runs its ops in order; F(i) on s > 0 takes an
// activation, B(i) on s < pp - 1 a gradient, from a first-in first-out
// channel of its pipeline's neighbour (sends never block); a ring's op runs
// only once every member's stage-s rank has it as its next op and its input.
// "" when all ops ran and every message was received, in the order sent,
// else the first message out of order or the ops stuck in a deadlock.
std::string simulate_pipelines(const Plan& plan, std::span<const PipeSchedule> schedules);

// Each HDP rank of `plan` run as a pipeline (parallel.pp > 1) as the runtime
// runs it: 1F1B over its slots with plan_loads' costs on `model`, every
// pipeline at once, a ring's op starting when all its members' stages can
// and lasting its slowest member's time. So a pipeline's timing includes
// its waits for the other pipelines of its rings (a short pipeline whose
// ring partner is busy ends late too). Throws Error if the plan deadlocks.
std::vector<PipeTiming> pipeline_timings(const Plan& plan, const PipelineModel& model,
                                         const CostModel& cost);
// Their makespans: each pipeline's predicted time.
std::vector<double> pipeline_times(const Plan& plan, const PipelineModel& model,
                                   const CostModel& cost);

}  // namespace meshloom::plan
