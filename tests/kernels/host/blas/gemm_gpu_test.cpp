// cuBLAS products with the CPU model's row-major convention, checked against
// the CPU's own gemm (lib/model/blas) in double: every transpose combination,
// odd shapes and leading dimensions wider than the matrix; fp32 to 1e-5,
// bf16 inputs (fp32 accumulation) to 1e-2.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/host/blas/gemm.hpp"
#include "kernels/host/device_buffer.hpp"
#include "model/blas.hpp"
#include "tests/kernels/elem_host.hpp"
#include "tests/kernels/gpu_test.hpp"

namespace {

using meshloom::cuda::Blas;
using meshloom::cuda::DeviceBuffer;
using meshloom::cuda::Dtype;
using meshloom::model::Op;

uint16_t to_bf16(float f) { return meshloom::cuda::test::Elem<__nv_bfloat16>::encode(f); }
float from_bf16(uint16_t h) { return float(meshloom::cuda::test::Elem<__nv_bfloat16>::decode(h)); }

struct Case {
  Op a, b;
  int64_t m, n, k;
};

// Max |x - ref| over max |ref|.
double rel_error(const std::vector<float>& x, const std::vector<double>& ref) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    err = std::max(err, std::abs(double(x[i]) - ref[i]));
    scale = std::max(scale, std::abs(ref[i]));
  }
  return err / std::max(scale, 1e-30);
}

void check(const Case& c, bool bf16) {
  std::mt19937 rng(uint32_t(c.m * 131 + c.n * 17 + c.k));
  std::normal_distribution<float> normal;
  const int64_t ra = c.a == Op::N ? c.m : c.k, ca = c.a == Op::N ? c.k : c.m;
  const int64_t rb = c.b == Op::N ? c.k : c.n, cb = c.b == Op::N ? c.n : c.k;
  const int64_t lda = ca + 3, ldb = cb + 1, ldc = c.n + 2;  // padded rows
  std::vector<float> a(size_t(ra * lda)), b(size_t(rb * ldb)), c0(size_t(c.m * ldc));
  for (auto* v : {&a, &b, &c0})
    for (float& x : *v) x = bf16 ? from_bf16(to_bf16(normal(rng))) : normal(rng);
  const float alpha = 0.75f, beta = 0.5f;
  std::vector<double> ad(a.begin(), a.end()), bd(b.begin(), b.end()), ref(c0.begin(), c0.end());
  meshloom::model::gemm<double>(c.a, c.b, c.m, c.n, c.k, alpha, ad.data(), lda, bd.data(), ldb,
                                beta, ref.data(), ldc);

  Blas blas(nullptr);
  std::vector<float> got;
  if (bf16) {
    std::vector<uint16_t> ah(a.size()), bh(b.size());
    std::transform(a.begin(), a.end(), ah.begin(), to_bf16);
    std::transform(b.begin(), b.end(), bh.begin(), to_bf16);
    DeviceBuffer<uint16_t> da(ah), db(bh);
    DeviceBuffer<float> dc(c0);  // fp32 output: the gradient-accumulation case
    blas.gemm(c.a, c.b, c.m, c.n, c.k, alpha, da.data(), lda, db.data(), ldb, beta, dc.data(), ldc,
              Dtype::bf16, Dtype::f32);
    got = dc.download();
  } else {
    DeviceBuffer<float> da(a), db(b), dc(c0);
    blas.gemm(c.a, c.b, c.m, c.n, c.k, alpha, da.data(), lda, db.data(), ldb, beta, dc.data(), ldc,
              Dtype::f32, Dtype::f32);
    got = dc.download();
  }
  // Padding columns must be untouched.
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = c.n; j < ldc; ++j)
      ASSERT_EQ(got[size_t(i * ldc + j)], c0[size_t(i * ldc + j)]) << "wrote past n";
  EXPECT_LE(rel_error(got, ref), bf16 ? 1e-2 : 1e-5)
      << "op_a " << int(c.a) << " op_b " << int(c.b) << " m " << c.m << " n " << c.n << " k "
      << c.k;
}

const Case kCases[] = {
    {Op::N, Op::N, 37, 53, 129}, {Op::N, Op::T, 64, 333, 96},    {Op::T, Op::N, 1, 7, 333},
    {Op::T, Op::T, 257, 31, 65}, {Op::N, Op::T, 512, 1376, 512},
};

}  // namespace

TEST(GpuGemm, Fp32MatchesTheCpu) {
  ML_REQUIRE_GPU();
  for (const Case& c : kCases) check(c, false);
}

TEST(GpuGemm, Bf16WithFp32AccumulationMatchesTheCpu) {
  ML_REQUIRE_GPU();
  for (const Case& c : kCases) check(c, true);
}
