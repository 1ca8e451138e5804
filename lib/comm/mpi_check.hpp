// MPI_CHECK: calls an MPI function and fails with file:line, the rank and
// MPI's own error string when it does not return MPI_SUCCESS. Communicators
// must use MPI_ERRORS_RETURN for this to see errors (the runtime sets it on
// MPI_COMM_WORLD); with the default handler MPI aborts first.
#pragma once

#include <mpi.h>

#include <string>

#include "base/check.hpp"

namespace meshloom::comm {

inline std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(len));
}

// The one deliberate exception to MPI_CHECK: calls on a peer that may have
// died and whose loss the job survives (a loader, whose shadow takes over).
// There a failed call means "that peer is gone": the caller drops the message
// or turns to the shadow instead of ending the job.
inline bool peer_call_ok(int mpi_rc) { return mpi_rc == MPI_SUCCESS; }

}  // namespace meshloom::comm

#define MPI_CHECK(call)                                                                \
  do {                                                                                 \
    int ml_mpi_rc_ = (call);                                                           \
    if (ml_mpi_rc_ != MPI_SUCCESS)                                                     \
      ::meshloom::fail(                                                                \
          __FILE__, __LINE__, "MPI",                                                   \
          std::string(#call) + ": " + ::meshloom::comm::mpi_error_string(ml_mpi_rc_)); \
  } while (0)
