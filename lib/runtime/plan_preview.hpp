// `meshloom plan --config`: the steps an experiment's data plane chooses,
// exactly as in training (its sources opened here, no MPI), each planned
// with the configured planner and with the static baseline, one line per
// step; with run.backend: cuda first the device memory a trainer needs.
#pragma once

#include <cstdint>
#include <functional>

#include "config/config.hpp"
#include "plan/plan.hpp"

namespace meshloom::runtime {

// Called with the first step's HDP (or configured) plan and the static grid's.
using FirstStepPlans = std::function<void(const plan::Plan& hdp, const plan::Plan& grid)>;

// trainers_per_node > 0: trainers sit on nodes of that many, in blocks, as a
// run's trainers on hosts (the layout line, and the first step's rings with
// the node boundaries they cross, follow).
void preview_plans(const config::Config& c, int trainers, int64_t steps,
                   const FirstStepPlans& on_first_step = {}, int trainers_per_node = 0);

}  // namespace meshloom::runtime
