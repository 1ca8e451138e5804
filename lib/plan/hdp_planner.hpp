// HDP planners: every sequence gets its own CP group of any size 1..T, as
// ByteScale's dynamic mesh does, and the work is balanced across trainers.
//
// Cost of a sequence (cost_model.hpp): whole on one trainer a*L^2 + b*L; as a
// member of a k-way ring a*L^2/k + b*L/k plus whatever ring communication the
// attention of each step does not hide.
//
// plan_hdp, meshloom's planner, in six steps:
//  1. Split. k_min = ceil(L / C), or fewer with offloading (min_split). A
//     sequence with L <= C is never split, so it never communicates.
//  2. Widen. Bound M = max(total work / T, largest whole sequence). For a
//     target f x M, a split sequence whose member time at k_min exceeds it
//     gets the smallest k >= k_min whose member time is within it (or the k
//     that minimizes it, when ring communication stops the gain first);
//     twice, as M moves a little. A very long sequence would otherwise set
//     the step time alone: at k_min each member does a*L*C of attention, far
//     more than the mean. But widening takes trainers that sequences which
//     cannot be split may need, so steps 3-5 run for f = none, 2, 1.5, 1.25,
//     1.1, 1, 0.75, 0.5, 0.25 and "as wide as useful" (split sequences then
//     take turns on the whole mesh), and the fastest schedule wins (ties: the
//     least widening, so the least ring traffic).
//  3. Gangs. Split sequences, longest member time first, each take the k
//     trainers that are free earliest (ties: lowest rank, so groups start as
//     runs of consecutive ranks and small rings stay inside a node); the ring
//     starts when the last of them is free. Members that wait leave a gap.
//  4. Whole sequences, costliest first: into the smallest gap they fit in
//     (best fit; that time is idle otherwise), else at the end of the trainer
//     that finishes first (LPT, Graham's longest processing time rule).
//  5. Local search. While the last trainer to finish can give a sequence to
//     the first, or swap one for a cheaper one, so that both end before the
//     current maximum, do the move that brings them closest together.
//  6. Pack. Each trainer's sequences of one gap, or of its tail, go into
//     micro-batches of at most C tokens (first fit decreasing), so trainers
//     run as many micro-batches as their work needs (ByteScale's "different
//     numbers of micro-batches"). Gap micro-batches run before the ring that
//     follows the gap; rings keep the global order of step 3, so no two
//     trainers wait on each other.
//
// plan_bytescale is ByteScale's Alg. 2 with DP-Balance as we read it: sort by
// length (longest first), cut into B buckets of about equal work (B = total
// tokens / (T x C), at least 1); then rounds: the trainers lagging the
// slowest by more than delta (relative) each get one micro-batch from the
// first bucket (a split sequence takes k lagging trainers; whole sequences
// are packed best fit up to C); when none lags, all trainers take part.
// It is the baseline the hdp planner's gain is measured against.
//
// plan_naive is ByteScale's Alg. 1: split sequences on consecutive trainers
// (wrapping around), whole sequences packed best fit into micro-batches of
// C tokens dealt out so that every trainer holds about the same tokens.
#pragma once

#include <cstdint>
#include <vector>

#include "plan/planner.hpp"

namespace meshloom::plan {

Plan plan_hdp(const std::vector<int64_t>& lengths, const PlannerOptions& options,
              const CostModel& cost);
Plan plan_bytescale(const std::vector<int64_t>& lengths, const PlannerOptions& options,
                    const CostModel& cost);
Plan plan_naive(const std::vector<int64_t>& lengths, const PlannerOptions& options,
                const CostModel& cost);

}  // namespace meshloom::plan
