// CUDA_CHECK and NCCL_CHECK: fail with file:line, the rank and the library's
// own error string (cudaGetErrorString / ncclGetErrorString).
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <string>

#include "base/check.hpp"

#define CUDA_CHECK(call)                                                             \
  do {                                                                               \
    cudaError_t ml_cuda_rc_ = (call);                                                \
    if (ml_cuda_rc_ != cudaSuccess)                                                  \
      ::meshloom::fail(__FILE__, __LINE__, "CUDA",                                   \
                       std::string(#call) + ": " + cudaGetErrorString(ml_cuda_rc_)); \
  } while (0)

#define NCCL_CHECK(call)                                                             \
  do {                                                                               \
    ncclResult_t ml_nccl_rc_ = (call);                                               \
    if (ml_nccl_rc_ != ncclSuccess)                                                  \
      ::meshloom::fail(__FILE__, __LINE__, "NCCL",                                   \
                       std::string(#call) + ": " + ncclGetErrorString(ml_nccl_rc_)); \
  } while (0)
