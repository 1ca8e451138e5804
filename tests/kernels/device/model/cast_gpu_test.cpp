// fp32 to bf16 conversion (kernels/device/model/cast.hpp): the 16-byte path
// for aligned buffers with a scalar tail, and the scalar path at an odd
// offset, both round to nearest even exactly as the host does.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/device/model/cast.hpp"
#include "kernels/host/device_buffer.hpp"
#include "tests/kernels/device/ops/ops_test_util.hpp"
#include "tests/kernels/gpu_test.hpp"

namespace meshloom::cuda::test {
namespace {

void check_convert(int64_t n, int64_t offset) {
  SCOPED_TRACE(testing::Message() << "n=" << n << " offset=" << offset);
  const std::vector<float> values = random_floats(n + offset, 3.0f, 81);
  DeviceBuffer<float> in(values);
  DeviceValues<bf16> out(std::vector<double>(size_t(n + offset), 0.0));
  convert<float, bf16>(in.data() + offset, n, out.data() + offset, nullptr);
  const std::vector<double> got = out.download();
  for (int64_t i = 0; i < n; ++i) {
    const float v = values[size_t(i + offset)];
    ASSERT_EQ(got[size_t(i + offset)], Elem<bf16>::decode(Elem<bf16>::encode(v))) << i;
  }
}

TEST(CastGpu, Fp32ToBf16RoundsToNearestEven) {
  ML_REQUIRE_GPU();
  check_convert(8 * 1000, 0);      // vector path only
  check_convert(8 * 1000 + 5, 0);  // with a scalar tail
  check_convert(8 * 1000 + 5, 1);  // misaligned: the scalar path
  check_convert(3, 0);             // tail only
}

}  // namespace
}  // namespace meshloom::cuda::test
