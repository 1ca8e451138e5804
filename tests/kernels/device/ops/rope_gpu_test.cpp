// GPU RoPE (kernels/device/ops/rope.hpp) against a double-precision reference of
// docs/design.md's rotate-half formula (the CPU's rope_apply is private to
// lib/model/transformer.cpp), on a fused QKV buffer with a padded leading
// dimension: q and k heads turn, v and the padding stay bit-identical.
// Positions restart at 0 mid-buffer and include a late chunk of a long
// sequence (large positions); backward is the rotation by −angle.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/device/ops/rope.hpp"
#include "kernels/host/model/device_rope_table.hpp"
#include "tests/kernels/device/ops/ops_test_util.hpp"
#include "tests/kernels/gpu_test.hpp"

namespace meshloom::cuda::test {
namespace {

// Rotates the first `heads` heads of each row by sign·angle.
std::vector<double> reference(const std::vector<double>& x, int64_t ld,
                              const std::vector<int32_t>& pos, int64_t heads, int64_t D,
                              double theta, double sign) {
  std::vector<double> y = x;
  const int64_t half = D / 2;
  for (size_t t = 0; t < pos.size(); ++t) {
    for (int64_t i = 0; i < half; ++i) {
      const double angle = double(pos[t]) * std::pow(theta, -2.0 * double(i) / double(D));
      const double c = std::cos(angle), s = sign * std::sin(angle);
      for (int64_t h = 0; h < heads; ++h) {
        const size_t a = size_t(int64_t(t) * ld + h * D + i), b = a + size_t(half);
        y[a] = x[a] * c - x[b] * s;
        y[b] = x[b] * c + x[a] * s;
      }
    }
  }
  return y;
}

// Positions of samples of the given lengths, each from 0, then `tail` tokens of
// a long sequence's chunk starting at `tail_start`.
std::vector<int32_t> positions(const std::vector<int32_t>& lengths, int32_t tail,
                               int32_t tail_start) {
  std::vector<int32_t> pos;
  for (int32_t L : lengths)
    for (int32_t p = 0; p < L; ++p) pos.push_back(p);
  for (int32_t p = 0; p < tail; ++p) pos.push_back(tail_start + p);
  return pos;
}

template <class T>
void check_rope(int64_t n_heads, int64_t n_kv_heads, int64_t D, double theta,
                const std::vector<int32_t>& pos, uint32_t seed) {
  const int64_t n = int64_t(pos.size());
  const int64_t heads = n_heads + n_kv_heads;
  const int64_t ld = (n_heads + 2 * n_kv_heads) * D + 5;  // q | k | v | padding
  SCOPED_TRACE(testing::Message() << Elem<T>::kName << " n=" << n << " heads=" << heads
                                  << " D=" << D << " theta=" << theta);
  const double tol = Elem<T>::kTolerance;
  const auto x = random_values<T>(n * ld, 1.0, seed);
  DeviceBuffer<int32_t> dpos(pos);
  DeviceRopeTable table(D, theta);
  table.cover(pos);
  const RopeAngles angles = table.angles();

  DeviceValues<T> fwd(x);
  rope_forward<T>(fwd.data(), ld, dpos.data(), n, heads, D, angles, nullptr);
  const std::vector<double> got = fwd.download();
  const std::vector<double> ref = reference(x, ld, pos, heads, D, theta, 1.0);
  EXPECT_LE(max_rel_error(got, ref), tol) << "forward";
  for (int64_t t = 0; t < n; ++t)
    for (int64_t c = heads * D; c < ld; ++c)
      ASSERT_EQ(got[size_t(t * ld + c)], x[size_t(t * ld + c)]) << "v or padding changed";

  DeviceValues<T> bwd(x);
  rope_backward<T>(bwd.data(), ld, dpos.data(), n, heads, D, angles, nullptr);
  EXPECT_LE(max_rel_error(bwd.download(), reference(x, ld, pos, heads, D, theta, -1.0)), tol)
      << "backward";

  // Backward undoes forward.
  rope_backward<T>(fwd.data(), ld, dpos.data(), n, heads, D, angles, nullptr);
  EXPECT_LE(max_rel_error(fwd.download(), x), 2 * tol) << "backward(forward(x)) != x";
}

TEST(RopeGpu, Fp32MatchesTheReference) {
  ML_REQUIRE_GPU();
  check_rope<float>(1, 1, 64, 10000.0, {0}, 31);
  check_rope<float>(4, 2, 64, 10000.0, positions({3, 1, 3}, 0, 0), 32);
  check_rope<float>(6, 2, 128, 10000.0, positions({100, 1, 150, 82}, 0, 0), 33);
  check_rope<float>(3, 3, 96, 500000.0, positions({200}, 133, 70000), 34);
}

TEST(RopeGpu, Bf16MatchesTheReference) {
  ML_REQUIRE_GPU();
  check_rope<bf16>(1, 1, 64, 10000.0, {0}, 41);
  check_rope<bf16>(4, 2, 64, 10000.0, positions({3, 1, 3}, 0, 0), 42);
  check_rope<bf16>(6, 2, 128, 10000.0, positions({100, 1, 150, 82}, 0, 0), 43);
  check_rope<bf16>(3, 3, 96, 500000.0, positions({200}, 133, 70000), 44);
}

}  // namespace
}  // namespace meshloom::cuda::test
