// Small helpers shared by the MPI tests.
#pragma once

#include <mpi.h>

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

}  // namespace meshloom::test
