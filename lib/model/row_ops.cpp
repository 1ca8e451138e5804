#include "model/row_ops.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "model/math.hpp"

namespace meshloom::model {
namespace {

// Row kernels (no threading; ML_SIMD_CLONES picks the vector width at load
// time) and the parallel loops over rows that call them.

// y = x / sqrt(mean(x²) + eps) · g; returns 1/sqrt(mean(x²) + eps).
template <class T>
ML_SIMD_CLONES T rmsnorm_row(int64_t d, const T* x, const T* g, T* y, T eps) {
  T ss = 0;
#pragma omp simd reduction(+ : ss)
  for (int64_t c = 0; c < d; ++c) ss += x[c] * x[c];
  const T r = T(1) / std::sqrt(ss / static_cast<T>(d) + eps);
  for (int64_t c = 0; c < d; ++c) y[c] = x[c] * r * g[c];
  return r;
}

// out = base + r·g⊙dy − x·r³/d·Σ(dy⊙g⊙x)   (base may be null or alias out).
template <class T>
ML_SIMD_CLONES void rmsnorm_backward_row(int64_t d, const T* dy, const T* x, const T* g, T r,
                                         const T* base, T* out) {
  T dot = 0;
#pragma omp simd reduction(+ : dot)
  for (int64_t c = 0; c < d; ++c) dot += dy[c] * g[c] * x[c];
  const T k = r * r * r * dot / static_cast<T>(d);
  if (base) {
    for (int64_t c = 0; c < d; ++c) out[c] = base[c] + r * g[c] * dy[c] - k * x[c];
  } else {
    for (int64_t c = 0; c < d; ++c) out[c] = r * g[c] * dy[c] - k * x[c];
  }
}

// acc[c − c0] += Σ_rows dy[i, c]·x[i, c]·rstd[i] for columns [c0, c1).
template <class T>
ML_SIMD_CLONES void gain_grad_columns(int64_t n, int64_t d, int64_t c0, int64_t c1, const T* dy,
                                      const T* x, const T* rstd, T* acc) {
  for (int64_t i = 0; i < n; ++i) {
    const T r = rstd[i];
    const T* dyr = dy + i * d;
    const T* xr = x + i * d;
    for (int64_t c = c0; c < c1; ++c) acc[c - c0] += dyr[c] * xr[c] * r;
  }
}

// Rotate-half RoPE of `heads` consecutive heads of D values: (x_i, x_{i+D/2})
// turns by the angle whose cos/sin are cs[i]/sign·sn[i].
template <class T>
ML_SIMD_CLONES void rope_row(int64_t heads, int64_t D, T* x, const T* cs, const T* sn, T sign) {
  const int64_t half = D / 2;
  for (int64_t h = 0; h < heads; ++h) {
    T* a = x + h * D;
    T* b = a + half;
    for (int64_t i = 0; i < half; ++i) {
      const T x1 = a[i], x2 = b[i], c = cs[i], s = sign * sn[i];
      a[i] = x1 * c - x2 * s;
      b[i] = x2 * c + x1 * s;
    }
  }
}

// u = silu(a) ⊙ b.
template <class T>
ML_SIMD_CLONES void swiglu_row(int64_t f, const T* a, const T* b, T* u) {
  for (int64_t j = 0; j < f; ++j) u[j] = a[j] * sigmoid(a[j]) * b[j];
}

// da = du⊙b⊙silu'(a), db = du⊙silu(a).
template <class T>
ML_SIMD_CLONES void swiglu_backward_row(int64_t f, const T* a, const T* b, const T* du, T* da,
                                        T* db) {
  for (int64_t j = 0; j < f; ++j) {
    const T s = sigmoid(a[j]);
    const T silu = a[j] * s;
    db[j] = du[j] * silu;
    da[j] = du[j] * b[j] * (s + silu * (T(1) - s));
  }
}

}  // namespace

template <class T>
void rmsnorm_forward(int threads, int64_t n, int64_t d, const T* x, const T* g, T* y, T* rstd,
                     double eps) {
#pragma omp parallel for num_threads(threads) schedule(static) if (n * d > kParallelElems)
  for (int64_t i = 0; i < n; ++i)
    rstd[i] = rmsnorm_row(d, x + i * d, g, y + i * d, static_cast<T>(eps));
}

template <class T>
void rmsnorm_backward(int threads, int64_t n, int64_t d, const T* dy, const T* x, const T* g,
                      const T* rstd, const T* base, T* out) {
#pragma omp parallel for num_threads(threads) schedule(static) if (n * d > kParallelElems)
  for (int64_t i = 0; i < n; ++i) {
    rmsnorm_backward_row(d, dy + i * d, x + i * d, g, rstd[i], base ? base + i * d : nullptr,
                         out + i * d);
  }
}

// dg += Σ_rows dy⊙x·r. Split by columns, each summed over rows in order, so
// the result does not depend on the thread count.
template <class T>
void rmsnorm_gain_grad(int threads, int64_t n, int64_t d, const T* dy, const T* x, const T* rstd,
                       T* dg) {
  constexpr int64_t kBlock = 64;
  const int64_t blocks = (d + kBlock - 1) / kBlock;
#pragma omp parallel for num_threads(threads) schedule(static) if (n * d > kParallelElems)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t c0 = b * kBlock, c1 = std::min(d, c0 + kBlock);
    T acc[kBlock] = {};
    gain_grad_columns(n, d, c0, c1, dy, x, rstd, acc);
    for (int64_t c = c0; c < c1; ++c) dg[c] += acc[c - c0];
  }
}

// RoPE on the first `heads` heads of every row (q heads then k heads in the
// fused QKV rows), with token t's cos/sin at [t·D/2]; `inverse` turns back
// (the transpose, for gradients).
template <class T>
void rope_apply(int threads, int64_t n, int64_t heads, int64_t D, T* x, int64_t ld,
                const T* cos_table, const T* sin_table, bool inverse) {
  const int64_t half = D / 2;
  const T sign = inverse ? T(-1) : T(1);
#pragma omp parallel for num_threads(threads) schedule(static) if (n * heads * D > kParallelElems)
  for (int64_t t = 0; t < n; ++t) {
    rope_row(heads, D, x + t * ld, cos_table + t * half, sin_table + t * half, sign);
  }
}

// u = silu(a) ⊙ b for rows [a | b] of width 2F.
template <class T>
void swiglu_forward(int threads, int64_t n, int64_t f, const T* ab, T* u) {
#pragma omp parallel for num_threads(threads) schedule(static) if (n * f > kParallelElems)
  for (int64_t t = 0; t < n; ++t) swiglu_row(f, ab + t * 2 * f, ab + t * 2 * f + f, u + t * f);
}

// [da | db] from du.
template <class T>
void swiglu_backward(int threads, int64_t n, int64_t f, const T* ab, const T* du, T* dab) {
#pragma omp parallel for num_threads(threads) schedule(static) if (n * f > kParallelElems)
  for (int64_t t = 0; t < n; ++t) {
    const T* a = ab + t * 2 * f;
    swiglu_backward_row(f, a, a + f, du + t * f, dab + t * 2 * f, dab + t * 2 * f + f);
  }
}

// out = a + b (element-wise: out may be a or b).
template <class T>
void add_rows(int threads, int64_t count, const T* a, const T* b, T* out) {
#pragma omp parallel for num_threads(threads) schedule(static) if (count > kParallelElems)
  for (int64_t i = 0; i < count; ++i) out[i] = a[i] + b[i];
}

template <class T>
void copy_rows(int threads, int64_t count, const T* src, T* dst) {
#pragma omp parallel for num_threads(threads) schedule(static) if (count > kParallelElems)
  for (int64_t i = 0; i < count; ++i) dst[i] = src[i];
}

#define ML_ROW_OPS_FOR(T)                                                                          \
  template void rmsnorm_forward<T>(int, int64_t, int64_t, const T*, const T*, T*, T*, double);     \
  template void rmsnorm_backward<T>(int, int64_t, int64_t, const T*, const T*, const T*, const T*, \
                                    const T*, T*);                                                 \
  template void rmsnorm_gain_grad<T>(int, int64_t, int64_t, const T*, const T*, const T*, T*);     \
  template void rope_apply<T>(int, int64_t, int64_t, int64_t, T*, int64_t, const T*, const T*,     \
                              bool);                                                               \
  template void swiglu_forward<T>(int, int64_t, int64_t, const T*, T*);                            \
  template void swiglu_backward<T>(int, int64_t, int64_t, const T*, const T*, T*);                 \
  template void add_rows<T>(int, int64_t, const T*, const T*, T*);                                 \
  template void copy_rows<T>(int, int64_t, const T*, T*);
ML_ROW_OPS_FOR(float)
ML_ROW_OPS_FOR(double)
#undef ML_ROW_OPS_FOR

}  // namespace meshloom::model
