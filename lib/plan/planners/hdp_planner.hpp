// HDP planners: every sequence gets its own CP group of any size 1..T, as
// ByteScale's dynamic mesh does, and the work is balanced across trainers.
//
// Cost of a sequence (cost_model.hpp): whole on one trainer a*L^2 + b*L; as a
// member of a k-way ring a*L^2/k + b*L/k plus whatever ring communication the
// attention of each step does not hide.
//
// plan_hdp, meshloom's planner:
//  1. Split. k_min = ceil(L / C), or fewer with offloading (min_split). A
//     sequence with L <= C is never split, so it never communicates; one
//     with L > C stays malleable: it may get more trainers than k_min.
//  2. Candidates. Let M = max(total work / T, largest whole sequence).
//     (a) Greedy gangs under a widening target f x M: every malleable
//         sequence whose member time exceeds it gets the smallest k >= k_min
//         whose member time is within it (or the k that minimizes it, where
//         ring traffic stops the gain first). Without this a very long
//         sequence sets the step alone: at k_min each member does a*L*C of
//         attention, far more than the mean. Then split sequences, longest
//         member time first, each take the k trainers free earliest (ties:
//         lowest rank, so groups start as runs of consecutive ranks and small
//         rings stay inside a node); the ring starts when the last is free,
//         and members that wait leave a gap. With the run's nodes
//         (CostModel::places_by_node), a ring whose k trainers free
//         earliest span nodes runs instead on the k free earliest of one
//         node when that ends no later (node_placement.hpp).
//     (b) Shelves over a region of R trainers: split sequences, most work
//         first, side by side while their k_min fit in R; each shelf then
//         shares out R so its sequences end together (the least height H
//         for which the smallest k_i >= k_min with member time <= H sum to
//         at most R). Shelves follow each other in time. With the run's
//         nodes, the rings of a shelf are packed into nodes (best fit,
//         widest first, any free ranks) instead of side by side from rank 0.
//     Each candidate is then also scheduled in rank order, which wins only
//     when faster (ties keep the nodes). Without an explicit node layout, or
//     with one node, placement is the rank order alone (a uniform
//     trainers_per_node only sets links), so those plans are as before.
//     For either, whole sequences, costliest first, go into the smallest gap
//     they fit in (best fit: that time is idle otherwise), else to the end
//     of the trainer that finishes first (LPT, Graham's rule). Then local
//     search: while the last trainer to finish can give a sequence to the
//     first, or swap one for a cheaper one, so that both end before the
//     current maximum, do the move that brings them closest together.
//     Widening takes trainers that unsplittable sequences may need, so no
//     single target is best: candidates, likeliest first, are f = 1, shelves
//     with R = T x (split share of the work), no widening, f = 1.1, 1.25,
//     1.5, 2 and 0.75, 0.5, 0.25, "as wide as useful" (on steps of more than
//     16,384 sequences + trainers each sweep stops when it gets worse),
//     shelves with R = T and a golden-section search over R.
//     The fastest wins (ties: the earlier); the search stops at the first
//     within 1% of the ideal step time (planner.hpp), which at scale is the
//     first or second candidate.
//  3. Pack. Each trainer's sequences of one gap, or of its tail, go into
//     micro-batches of at most C tokens (best fit decreasing), so trainers
//     run as many micro-batches as their work needs (ByteScale's "different
//     numbers of micro-batches"). Gap micro-batches run before the ring that
//     follows the gap; rings keep the global order of their start times, so
//     no two trainers wait on each other.
//  4. Portfolio. If the result is still more than 1% above the ideal
//     (coarse batches: few sequences per trainer, lengths near multiples of
//     C), ByteScale's Alg. 2 schedule is computed too and kept if faster, so
//     hdp is never slower than it.
//  5. Static fallback (options.static_fallback, off by default). Rule 1
//     costs on coarse batches: with T = 4 and lengths 4C, C, C the grid
//     (CP 4) splits all three, step ~ cost(4C)/4 + 2 cost(C)/4, while HDP
//     runs each C whole after the 4C ring, step >= cost(4C)/4 + cost(C).
//     With the option the grid's plan (plan_static, same options) is
//     computed too and returned when its makespan is strictly smaller (still
//     named "hdp"; Plan::static_fallback() is true), so hdp is never slower
//     than static under the cost model, at the price of rule 1 for that
//     step. A batch the grid cannot hold keeps HDP's plan.
//
#pragma once

#include <cstdint>
#include <vector>

#include "plan/planner.hpp"

namespace meshloom::plan {

Plan plan_hdp(const std::vector<int64_t>& lengths, const PlannerOptions& options,
              const CostModel& cost);

}  // namespace meshloom::plan
