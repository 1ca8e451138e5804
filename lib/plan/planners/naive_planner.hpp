// plan_naive is ByteScale's Alg. 1: split sequences on consecutive trainers
// (wrapping around), whole sequences packed best fit into micro-batches of
// C tokens dealt out so that every trainer holds about the same tokens.
#pragma once

#include <cstdint>
#include <vector>

#include "plan/planner.hpp"

namespace meshloom::plan {

Plan plan_naive(const std::vector<int64_t>& lengths, const PlannerOptions& options,
                const CostModel& cost);

}  // namespace meshloom::plan
