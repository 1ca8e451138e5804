// A data worker of the colocated baseline (`meshloom data-worker`): the
// process sources/data_workers.hpp spawns, building each step's batch from
// sources it opens itself, as a colocated constructor would.
#pragma once

namespace meshloom::roles {

// Serves the trainer on socket `fd` until end of input; returns the exit code.
int run_data_worker(int fd, int rank, int index);

}  // namespace meshloom::roles
