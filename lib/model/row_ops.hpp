// The CPU model's row operations: RMSNorm, RoPE and SwiGLU forward and
// backward, and elementwise adds and copies, each parallel over rows with
// OpenMP above a size where threads pay off. Results do not depend on the
// thread count. Instantiated for float and double.
#pragma once

#include <cstdint>

namespace meshloom::model {

// Elementwise loops go parallel above this many elements.
constexpr int64_t kParallelElems = 1 << 15;

// y = x / sqrt(mean(x²) + eps) · g per row; rstd = 1 / sqrt(mean(x²) + eps).
template <class T>
void rmsnorm_forward(int threads, int64_t n, int64_t d, const T* x, const T* g, T* y, T* rstd,
                     double eps);

template <class T>
void rmsnorm_backward(int threads, int64_t n, int64_t d, const T* dy, const T* x, const T* g,
                      const T* rstd, const T* base, T* out);

// dg += Σ_rows dy⊙x·r. Split by columns, each summed over rows in order, so
// the result does not depend on the thread count.
template <class T>
void rmsnorm_gain_grad(int threads, int64_t n, int64_t d, const T* dy, const T* x, const T* rstd,
                       T* dg);

// RoPE on the first `heads` heads of every row (q heads then k heads in the
// fused QKV rows), with token t's cos/sin at [t·D/2]; `inverse` turns back
// (the transpose, for gradients).
template <class T>
void rope_apply(int threads, int64_t n, int64_t heads, int64_t D, T* x, int64_t ld,
                const T* cos_table, const T* sin_table, bool inverse);

// u = silu(a) ⊙ b for rows [a | b] of width 2F.
template <class T>
void swiglu_forward(int threads, int64_t n, int64_t f, const T* ab, T* u);

// [da | db] from du.
template <class T>
void swiglu_backward(int threads, int64_t n, int64_t f, const T* ab, const T* du, T* dab);

// out = a + b (element-wise: out may be a or b).
template <class T>
void add_rows(int threads, int64_t count, const T* a, const T* b, T* out);

template <class T>
void copy_rows(int threads, int64_t count, const T* src, T* dst);

}  // namespace meshloom::model
