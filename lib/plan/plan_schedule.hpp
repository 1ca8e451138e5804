// Running a plan's micro-batch orders as the trainers would: shared by
// Plan::retime (the times) and Plan::validate (that the orders can run).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "plan/plan.hpp"

namespace meshloom::plan {

using Duration = std::function<double(int32_t trainer, const MicroBatch& mb)>;

// Runs every trainer's micro-batches in order, a ring starting when the last
// of its members reaches it. Writes start/end into `mbs` when given. Returns
// "" or why the orders cannot all run (two trainers wait on each other).
std::string run_schedule(const Plan& p, const Duration& duration, std::vector<MicroBatch>* mbs);

}  // namespace meshloom::plan
