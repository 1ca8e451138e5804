#include "runtime/run_role.hpp"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "base/check.hpp"
#include "roles/constructor.hpp"
#include "roles/loader.hpp"

namespace meshloom::runtime {

namespace {
// One message, the code in the exit file, and the job ends (a lone exiting
// rank would leave the others waiting).
[[noreturn]] void leave(int rank, int code, const std::string& message) {
  print_error(message, std::to_string(rank));
  parallel::record_exit(code);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}
}  // namespace

int run_role(const parallel::World& w, const std::function<int()>& lead,
             const std::function<int()>& trainer) {
  int code = 0;
  try {
    switch (w.role) {
      case parallel::Role::loader:
        roles::run_loader(w);
        break;
      case parallel::Role::trainer:
        code = trainer();
        break;
      case parallel::Role::constructor:
        if (w.rank == 0)
          code = lead();
        else
          roles::run_constructor(w);
        break;
    }
  } catch (...) {
    const Failure f = failure_of(std::current_exception());
    leave(w.rank, f.exit_code, f.message);
  }
  return code;
}

// --- trainer side -------------------------------------------------------------------

}  // namespace meshloom::runtime
