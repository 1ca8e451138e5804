// GPU SwiGLU (kernels/device/ops/swiglu.hpp) against a double-precision reference of
// docs/design.md's gate on the CPU's fused [a | b] rows (the CPU's row kernels are
// private to lib/model/transformer.cpp), fp32 and bf16, odd sizes, including
// the in-place backward (dab over ab). bf16 rows of a multiple of 8 take the
// 16-byte vector path, others the scalar one; both give the same bits.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/device/ops/swiglu.hpp"
#include "tests/kernels/device/ops/ops_test_util.hpp"
#include "tests/kernels/gpu_test.hpp"

namespace meshloom::cuda::test {
namespace {

template <class T>
void check_swiglu(int64_t n, int64_t f, uint32_t seed) {
  SCOPED_TRACE(testing::Message() << Elem<T>::kName << " n=" << n << " f=" << f);
  const double tol = Elem<T>::kTolerance;
  const auto ab = random_values<T>(n * 2 * f, 3.0, seed);  // wide: both tails of σ
  const auto dh = random_values<T>(n * f, 1.0, seed + 1);
  std::vector<double> h(static_cast<size_t>(n * f)), dab(static_cast<size_t>(n * 2 * f));
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t j = 0; j < f; ++j) {
      const double a = ab[size_t(t * 2 * f + j)], b = ab[size_t(t * 2 * f + f + j)];
      const double s = 1.0 / (1.0 + std::exp(-a)), silu = a * s, du = dh[size_t(t * f + j)];
      h[size_t(t * f + j)] = silu * b;
      dab[size_t(t * 2 * f + j)] = du * b * (s + silu * (1.0 - s));
      dab[size_t(t * 2 * f + f + j)] = du * silu;
    }
  }
  DeviceValues<T> dab_in(ab), ddh(dh), dout(std::vector<double>(size_t(n * f)));
  DeviceValues<T> dgrad(std::vector<double>(size_t(n * 2 * f)));
  swiglu_forward<T>(dab_in.data(), n, f, dout.data(), nullptr);
  EXPECT_LE(max_rel_error(dout.download(), h), tol) << "forward";
  swiglu_backward<T>(dab_in.data(), ddh.data(), n, f, dgrad.data(), nullptr);
  EXPECT_LE(max_rel_error(dgrad.download(), dab), tol) << "backward";
  swiglu_backward<T>(dab_in.data(), ddh.data(), n, f, dab_in.data(), nullptr);
  EXPECT_LE(max_rel_error(dab_in.download(), dab), tol) << "backward in place";
}

TEST(SwigluGpu, Fp32MatchesTheReference) {
  ML_REQUIRE_GPU();
  check_swiglu<float>(1, 64, 51);
  check_swiglu<float>(7, 96, 52);
  check_swiglu<float>(333, 4096 + 8, 53);
}

TEST(SwigluGpu, Bf16MatchesTheReference) {
  ML_REQUIRE_GPU();
  check_swiglu<bf16>(1, 64, 61);
  check_swiglu<bf16>(7, 96, 62);
  check_swiglu<bf16>(333, 4096 + 8, 63);
  check_swiglu<bf16>(5, 100, 64);  // 200-byte rows: the scalar path
}

// The same values at an odd element offset (the scalar path) and at the
// buffer's start (the vector path): identical outputs.
TEST(SwigluGpu, Bf16VectorPathEqualsTheScalarPath) {
  ML_REQUIRE_GPU();
  const int64_t n = 9, f = 256;
  std::vector<double> ab = random_values<bf16>(n * 2 * f, 3.0, 71);
  const std::vector<double> dh = random_values<bf16>(n * f, 1.0, 72);
  std::vector<double> ab_shifted = ab, dh_shifted = dh;
  ab_shifted.insert(ab_shifted.begin(), 0.0);
  dh_shifted.insert(dh_shifted.begin(), 0.0);
  DeviceValues<bf16> vab(ab), vdh(dh), vh(std::vector<double>(size_t(n * f)));
  DeviceValues<bf16> vgrad(std::vector<double>(size_t(n * 2 * f)));
  DeviceValues<bf16> sab(ab_shifted), sdh(dh_shifted), sh(std::vector<double>(size_t(n * f) + 1));
  DeviceValues<bf16> sgrad(std::vector<double>(size_t(n * 2 * f) + 1));
  swiglu_forward<bf16>(vab.data(), n, f, vh.data(), nullptr);
  swiglu_forward<bf16>(sab.data() + 1, n, f, sh.data() + 1, nullptr);
  std::vector<double> scalar = sh.download();
  scalar.erase(scalar.begin());
  EXPECT_EQ(vh.download(), scalar) << "forward";
  swiglu_backward<bf16>(vab.data(), vdh.data(), n, f, vgrad.data(), nullptr);
  swiglu_backward<bf16>(sab.data() + 1, sdh.data() + 1, n, f, sgrad.data() + 1, nullptr);
  scalar = sgrad.download();
  scalar.erase(scalar.begin());
  EXPECT_EQ(vgrad.download(), scalar) << "backward";
}

}  // namespace
}  // namespace meshloom::cuda::test
