// The few lines `meshloom plan` prints about a plan (pure formatting).
#pragma once

#include <string>

#include "plan/plan.hpp"

namespace meshloom::plan {

// Planner, sequences, tokens, trainers and capacity; the predicted step,
// imbalance, step / ideal (`ideal`: the least step time, 0: unknown) and idle
// share; split sequences, ring traffic, micro-batches per trainer; the CP
// algorithms of split sequences ("ring 3, ulysses 5, hybrid(4x2) 1"); planning
// time and the binary plan's size. Lines end in newlines.
std::string plan_summary(const Plan& p, double ideal);

}  // namespace meshloom::plan
