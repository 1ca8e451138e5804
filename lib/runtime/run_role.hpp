// Runs this rank's role until the end of the job.
#pragma once

#include <functional>

#include "parallel/world.hpp"

namespace meshloom::runtime {

// Loaders and non-lead constructors serve; rank 0 runs `lead`, trainers run
// `trainer`. An exception on any rank (a bad source file, ...) is printed
// with the rank and ends the whole job with failure_of's exit code (2 for a
// meshloom::Error, 1 for others). Returns the exit code.
int run_role(const parallel::World& w, const std::function<int()>& lead,
             const std::function<int()>& trainer);

}  // namespace meshloom::runtime
