// Small helpers shared by the MPI tests.
#pragma once

#include <mpi.h>
#include <unistd.h>

#include <string>

namespace meshloom::test {

inline int rank_of(MPI_Comm c) {
  int r = 0;
  MPI_Comm_rank(c, &r);
  return r;
}

inline int size_of(MPI_Comm c) {
  int n = 0;
  MPI_Comm_size(c, &n);
  return n;
}

// A file name in /tmp that every rank of MPI_COMM_WORLD shares (rank 0's
// process id in it), for tests that write one file together.
inline std::string shared_tmp_path(const std::string& name) {
  long pid = getpid();
  MPI_Bcast(&pid, 1, MPI_LONG, 0, MPI_COMM_WORLD);
  return "/tmp/meshloom_" + std::to_string(pid) + "_" + name + ".h5";
}

}  // namespace meshloom::test
