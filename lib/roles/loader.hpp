// A loader rank: serves its sources' document lengths and tokens to the lead
// and the constructors, mirrors what it prepares to its shadow, and prepares
// what the loaders it shadows prepared, until the lead says stop. Injected
// faults (roles/faults.hpp) fire on the first request of their step.
#pragma once

#include "parallel/world.hpp"

namespace meshloom::roles {

void run_loader(const parallel::World& w);

}  // namespace meshloom::roles
