// The static-mesh baseline: a fixed DP x CP grid, as Megatron-LM (and
// ByteScale's baseline) lay out long-context training.
//
// CP is set by the longest sequence the run allows (seq_len_max), not by the
// batch: the smallest cp with 2 * ceil(seq_len_max / 2cp) <= C (a padded
// chunk pair fits in C), rounded up to the smallest divisor of T that is at
// least cp, so that DP = T / CP is whole. (For T a power of two that is the
// next power of two; for T = 12,288 = 3 x 4,096 also 3 x 2^i.) Axis order
// "cp-dp": DP rank d owns trainers [d*CP, (d+1)*CP), CP inner, e.g. T = 8,
// CP = 4: DP rank 0 = trainers 0-3, DP rank 1 = trainers 4-7.
//
// Every sequence is split CP ways, even one of 10 tokens, padded to a
// multiple of 2*CP (ChunkRule::kPadded, as THD CP requires). Sequences are
// packed into micro-batches of C padded tokens per member (best fit
// decreasing), and micro-batches dealt to DP ranks so that each holds about
// the same number of tokens (greedy, largest micro-batch first) - balanced by
// tokens, not by work, which is the imbalance HDP removes.
#pragma once

#include <cstdint>
#include <vector>

#include "plan/planner.hpp"

namespace meshloom::plan {

// The CP degree of the grid (see above); throws when no divisor of T fits.
int32_t static_cp_degree(int64_t seq_len_max, int64_t capacity, int32_t trainers);

Plan plan_static(const std::vector<int64_t>& lengths, const PlannerOptions& options,
                 const CostModel& cost);

}  // namespace meshloom::plan
