// GPU RMSNorm (kernels/device/ops/norm.hpp) against a double-precision reference of
// docs/design.md's formula (the CPU's row kernels are private to
// lib/model/transformer.cpp), fp32 and bf16, odd sizes; the gain gradient
// accumulates into what is there and is bit-identical run to run. bf16 rows
// of a multiple of 8 (64, 96, 4104) take the 16-byte path, 33 the scalar one.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/device/ops/norm.hpp"
#include "tests/kernels/device/ops/ops_test_util.hpp"
#include "tests/kernels/gpu_test.hpp"

namespace meshloom::cuda::test {
namespace {

struct NormRef {
  std::vector<double> y, rstd, dx, dg;
};

// y = x·r·g, r = 1/sqrt(mean(x²) + 1e-5); dx = base + r·g·dy − x·r³/d·Σ dy·g·x;
// dg = dg0 + Σ_rows dy·x·r.
NormRef reference(int64_t n, int64_t d, const std::vector<double>& x, const std::vector<double>& g,
                  const std::vector<double>& dy, const std::vector<double>& base,
                  const std::vector<double>& dg0) {
  NormRef r{std::vector<double>(x.size()), std::vector<double>(size_t(n)),
            std::vector<double>(x.size()), dg0};
  for (int64_t i = 0; i < n; ++i) {
    const size_t o = size_t(i * d);
    double ss = 0, dot = 0;
    for (int64_t c = 0; c < d; ++c) ss += x[o + size_t(c)] * x[o + size_t(c)];
    const double rs = 1.0 / std::sqrt(ss / double(d) + 1e-5);
    r.rstd[size_t(i)] = rs;
    for (int64_t c = 0; c < d; ++c) {
      const size_t k = o + size_t(c);
      r.y[k] = x[k] * rs * g[size_t(c)];
      dot += dy[k] * g[size_t(c)] * x[k];
    }
    for (int64_t c = 0; c < d; ++c) {
      const size_t k = o + size_t(c);
      r.dx[k] = base[k] + rs * g[size_t(c)] * dy[k] - x[k] * rs * rs * rs / double(d) * dot;
      r.dg[size_t(c)] += dy[k] * x[k] * rs;
    }
  }
  return r;
}

template <class T>
void check_rmsnorm(int64_t n, int64_t d, uint32_t seed) {
  SCOPED_TRACE(testing::Message() << Elem<T>::kName << " n=" << n << " d=" << d);
  const double tol = Elem<T>::kTolerance;
  const auto x = random_values<T>(n * d, 1.5, seed);
  const auto g = random_values<T>(d, 1.0, seed + 1);
  const auto dy = random_values<T>(n * d, 1.0, seed + 2);
  const auto base = random_values<T>(n * d, 1.0, seed + 3);
  std::vector<double> dg0(static_cast<size_t>(d));
  for (int64_t c = 0; c < d; ++c) dg0[size_t(c)] = 0.25 * double(c % 7);
  const NormRef ref = reference(n, d, x, g, dy, base, dg0);

  DeviceValues<T> d_x(x), d_g(g), d_dy(dy), d_y(std::vector<double>(size_t(n * d)));
  DeviceBuffer<float> rstd(static_cast<size_t>(n));
  rmsnorm_forward<T>(d_x.data(), d_g.data(), n, d, d_y.data(), rstd.data(), 1e-5, nullptr);
  EXPECT_LE(max_rel_error(d_y.download(), ref.y), tol) << "y";
  EXPECT_LE(max_rel_error(to_double(rstd.download()), ref.rstd), 1e-5) << "rstd";

  // dx with a residual base, written in place over the base (the model's use),
  // then without a base into a separate buffer.
  std::vector<float> dg_first;
  for (int run = 0; run < 2; ++run) {
    DeviceValues<T> dx(base);
    DeviceBuffer<float> dg(std::vector<float>(dg0.begin(), dg0.end()));
    rmsnorm_backward<T>(d_dy.data(), d_x.data(), d_g.data(), rstd.data(), dx.data(), n, d,
                        dx.data(), dg.data(), nullptr);
    EXPECT_LE(max_rel_error(dx.download(), ref.dx), tol) << "dx";
    const std::vector<float> dg_host = dg.download();
    EXPECT_LE(max_rel_error(to_double(dg_host), ref.dg), tol) << "dg";
    if (run == 0) {
      dg_first = dg_host;
    } else {
      EXPECT_EQ(dg_host, dg_first) << "the gain gradient is not deterministic";
    }
  }
  DeviceValues<T> dx_plain(std::vector<double>(size_t(n * d), 7.0));
  DeviceBuffer<float> dg(std::vector<float>(dg0.begin(), dg0.end()));
  rmsnorm_backward<T>(d_dy.data(), d_x.data(), d_g.data(), rstd.data(), nullptr, n, d,
                      dx_plain.data(), dg.data(), nullptr);
  std::vector<double> ref_plain = ref.dx;
  for (size_t k = 0; k < ref_plain.size(); ++k) ref_plain[k] -= base[k];
  EXPECT_LE(max_rel_error(dx_plain.download(), ref_plain), tol) << "dx without base";
}

TEST(RmsNormGpu, Fp32MatchesTheReference) {
  ML_REQUIRE_GPU();
  check_rmsnorm<float>(1, 64, 11);
  check_rmsnorm<float>(7, 96, 12);
  check_rmsnorm<float>(333, 4096 + 8, 13);
  check_rmsnorm<float>(4099, 33, 14);  // many rows: several chunks in the gain gradient
}

TEST(RmsNormGpu, Bf16MatchesTheReference) {
  ML_REQUIRE_GPU();
  check_rmsnorm<bf16>(1, 64, 21);
  check_rmsnorm<bf16>(7, 96, 22);
  check_rmsnorm<bf16>(333, 4096 + 8, 23);
  check_rmsnorm<bf16>(4099, 33, 24);
}

}  // namespace
}  // namespace meshloom::cuda::test
