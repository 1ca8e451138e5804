// Shared by the GPU tests: skip cleanly where no GPU is visible (CI on a CPU
// machine), so the test binaries build and pass everywhere.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "kernels/device/device_info.hpp"

#define ML_REQUIRE_GPU()                                   \
  do {                                                     \
    std::string ml_gpu_why_;                               \
    if (::meshloom::cuda::device_count(&ml_gpu_why_) == 0) \
      GTEST_SKIP() << "no GPU: " << ml_gpu_why_;           \
  } while (0)
