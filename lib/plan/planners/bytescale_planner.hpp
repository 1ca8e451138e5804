// plan_bytescale is ByteScale's Alg. 2 with DP-Balance as we read it: sort by
// length (longest first), cut into B buckets of about equal work (B = total
// tokens / (T x C), at least 1); then rounds: the trainers lagging the
// slowest by more than delta (relative) each get one micro-batch from the
// first bucket (a split sequence takes k lagging trainers; whole sequences
// are packed best fit up to C); when none lags, all trainers take part.
// It is the baseline the hdp planner's gain is measured against.
#pragma once

#include <cstdint>
#include <vector>

#include "plan/planner.hpp"

namespace meshloom::plan {

Plan plan_bytescale(const std::vector<int64_t>& lengths, const PlannerOptions& options,
                    const CostModel& cost);

}  // namespace meshloom::plan
