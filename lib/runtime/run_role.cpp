#include "runtime/run_role.hpp"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>
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
  record_exit(code);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}
}  // namespace

int run_role(const World& w, const std::function<int()>& lead,
             const std::function<int()>& trainer) {
  int code = 0;
  try {
    switch (w.role) {
      case Role::loader:
        roles::run_loader(w);
        break;
      case Role::trainer:
        code = trainer();
        break;
      case Role::constructor:
        if (w.rank == 0)
          code = lead();
        else
          roles::run_constructor(w);
        break;
    }
  } catch (const Error& e) {
    leave(w.rank, 2, e.what());
  } catch (const std::bad_alloc&) {
    leave(w.rank, 1,
          "out of host memory (std::bad_alloc): the model or the batch is too large for this "
          "node (model.*, data.tokens_per_step, plan.capacity)");
  } catch (const std::exception& e) {
    leave(w.rank, 1, e.what());
  }
  return code;
}

// --- trainer side -------------------------------------------------------------------

}  // namespace meshloom::runtime
