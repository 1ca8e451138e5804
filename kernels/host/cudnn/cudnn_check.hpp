// CUDNN_CHECK: the CUDA_CHECK / NCCL_CHECK of cuDNN (check.cuh). Fails with
// file:line, the call, cuDNN's status string and its last error message,
// which names the attribute or the rule that a descriptor broke.
// A header of its own so that code without cuDNN never includes cudnn.h.
#pragma once

#include <cudnn.h>

#include <string>

#include "base/check.hpp"

namespace meshloom {
// "STATUS_NAME: cuDNN's last error message" (for CUDNN_CHECK).
std::string cudnn_error_text(cudnnStatus_t status);
}  // namespace meshloom

#define CUDNN_CHECK(call)                                                                       \
  do {                                                                                          \
    cudnnStatus_t ml_cudnn_rc_ = (call);                                                        \
    if (ml_cudnn_rc_ != CUDNN_STATUS_SUCCESS)                                                   \
      ::meshloom::fail(__FILE__, __LINE__, "cuDNN",                                             \
                       std::string(#call) + ": " + ::meshloom::cudnn_error_text(ml_cudnn_rc_)); \
  } while (0)
