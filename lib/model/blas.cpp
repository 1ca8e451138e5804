#include "model/blas.hpp"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <mutex>

#include "base/check.hpp"
#include "base/strings.hpp"

namespace meshloom::model {
namespace {

CBLAS_TRANSPOSE cblas_op(Op op) { return op == Op::N ? CblasNoTrans : CblasTrans; }

void check_dims(int64_t m, int64_t n, int64_t k) {
  constexpr int64_t kMax = 0x7fffffff;
  ML_CHECK(m <= kMax && n <= kMax && k <= kMax,
           strf("gemm too large for 32-bit BLAS: %lld x %lld x %lld", static_cast<long long>(m),
                static_cast<long long>(n), static_cast<long long>(k)));
}

void call_blas(Op op_a, Op op_b, int m, int n, int k, float alpha, const float* a, int lda,
               const float* b, int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, cblas_op(op_a), cblas_op(op_b), m, n, k, alpha, a, lda, b, ldb, beta,
              c, ldc);
}

void call_blas(Op op_a, Op op_b, int m, int n, int k, double alpha, const double* a, int lda,
               const double* b, int ldb, double beta, double* c, int ldc) {
  cblas_dgemm(CblasRowMajor, cblas_op(op_a), cblas_op(op_b), m, n, k, alpha, a, lda, b, ldb, beta,
              c, ldc);
}

std::once_flag g_one_thread;

}  // namespace

void blas_use_one_thread() {
  std::call_once(g_one_thread, [] { openblas_set_num_threads(1); });
  if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);
}

void blas_set_native_threads(int threads) { openblas_set_num_threads(threads); }

int resolve_threads(int requested) {
  return requested > 0 ? requested : std::max(1, omp_get_max_threads());
}

template <class T>
void gemm(Op op_a, Op op_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
          const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  check_dims(m, n, k);
  std::call_once(g_one_thread, [] { openblas_set_num_threads(1); });
  // BLAS demands leading dimensions of at least 1 even when k == 0.
  call_blas(op_a, op_b, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a,
            static_cast<int>(std::max<int64_t>(lda, 1)), b,
            static_cast<int>(std::max<int64_t>(ldb, 1)), beta, c, static_cast<int>(ldc));
}

template <class T>
void gemm_parallel(int threads, Op op_a, Op op_b, int64_t m, int64_t n, int64_t k, T alpha,
                   const T* a, int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  // The cut depends on the shape only, never on the thread count: every slice
  // is the same BLAS call whichever thread runs it, so results are the same
  // with 1 thread or 16. Slices are at most ~256 wide, at least 2 and an even
  // number of them: each slice repacks the operand it shares with the others,
  // so thinner slices would cost more copying than they gain. Below ~4 MFLOP
  // one call is best.
  const double flops =
      2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const bool split_m = m >= n;
  const int64_t total = split_m ? m : n;
  if (flops < 4e6 || total < 32) {
    gemm(op_a, op_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  int64_t slices = std::max<int64_t>(2, (total + 255) / 256);
  slices += slices % 2;  // an even count balances 2 (and 4, 8) threads
  const int64_t slice = ((total + slices - 1) / slices + 15) / 16 * 16;
  slices = (total + slice - 1) / slice;
  const int team = omp_in_parallel() ? 1 : std::max(1, threads);
#pragma omp parallel for num_threads(team) schedule(static) if (team > 1)
  for (int64_t s = 0; s < slices; ++s) {
    const int64_t lo = s * slice, hi = std::min(total, lo + slice);
    if (split_m) {
      const T* a_part = op_a == Op::N ? a + lo * lda : a + lo;
      gemm(op_a, op_b, hi - lo, n, k, alpha, a_part, lda, b, ldb, beta, c + lo * ldc, ldc);
    } else {
      const T* b_part = op_b == Op::N ? b + lo : b + lo * ldb;
      gemm(op_a, op_b, m, hi - lo, k, alpha, a, lda, b_part, ldb, beta, c + lo, ldc);
    }
  }
}

template void gemm<float>(Op, Op, int64_t, int64_t, int64_t, float, const float*, int64_t,
                          const float*, int64_t, float, float*, int64_t);
template void gemm<double>(Op, Op, int64_t, int64_t, int64_t, double, const double*, int64_t,
                           const double*, int64_t, double, double*, int64_t);
template void gemm_parallel<float>(int, Op, Op, int64_t, int64_t, int64_t, float, const float*,
                                   int64_t, const float*, int64_t, float, float*, int64_t);
template void gemm_parallel<double>(int, Op, Op, int64_t, int64_t, int64_t, double, const double*,
                                    int64_t, const double*, int64_t, double, double*, int64_t);

}  // namespace meshloom::model
