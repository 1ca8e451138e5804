// Runs this rank's role until the end of the job.
#pragma once

#include <functional>

#include "parallel/world.hpp"

namespace meshloom::runtime {

// Loaders and non-lead constructors serve; rank 0 runs `lead`, trainers run
// `trainer`. A meshloom::Error on any rank (a bad source file, ...) is
// printed with the rank and ends the whole job with exit code 2, other
// exceptions with 1. Returns the exit code.
int run_role(const World& w, const std::function<int()>& lead, const std::function<int()>& trainer);

}  // namespace meshloom::runtime
