// Shared by the MPI tests of NCCL: this rank and the rank count of
// MPI_COMM_WORLD, and a skip. NCCL refuses two ranks on one GPU, so a test
// needs one GPU per rank. nccl_usable() is collective and answers the
// same on every rank, so all ranks skip or none does, and none waits alone
// in a collective.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

#include <string>

#include "kernels/host/comm/nccl_comm.hpp"
#include "tests/kernels/gpu_test.hpp"

namespace meshloom::cuda {

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

inline int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

}  // namespace meshloom::cuda

// Agreed first (collective), so ML_REQUIRE_GPU() after it skips on all ranks or none.
#define ML_REQUIRE_GPU_PER_RANK()                                      \
  do {                                                                 \
    std::string ml_nccl_why_;                                          \
    if (!::meshloom::cuda::nccl_usable(MPI_COMM_WORLD, &ml_nccl_why_)) \
      GTEST_SKIP() << ml_nccl_why_;                                    \
    ML_REQUIRE_GPU();                                                  \
  } while (0)
