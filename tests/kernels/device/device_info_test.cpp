// The device query never fails: it names the devices, or says why there are none.
#include "kernels/device/device_info.hpp"

#include <gtest/gtest.h>

#include "tests/kernels/gpu_test.hpp"

TEST(DeviceInfo, SummaryNamesTheRuntimeAndDevicesOrWhyNone) {
  std::string why;
  const int n = meshloom::cuda::device_count(&why);
  const std::string s = meshloom::cuda::summary();
  EXPECT_NE(s.find("CUDA runtime"), std::string::npos) << s;
  if (n == 0) {
    EXPECT_FALSE(why.empty());
  }
}

TEST(DeviceInfo, SkipsWithoutAGpu) {
  ML_REQUIRE_GPU();
  std::string why;
  EXPECT_GE(meshloom::cuda::device_count(&why), 1);
}
