// RMSNorm on the GPU, the twin of the CPU rows in lib/model/transformer.cpp:
//   y = x / sqrt(mean(x²) + 1e-5) · g      over the last dimension d,
// with rstd = 1/sqrt(mean(x²) + 1e-5) kept per row for backward.
//
// Backward, for r = rstd of the row:
//   dx = base + r·g⊙dy − x·r³/d·Σ(dy⊙g⊙x)     (base: the residual gradient)
//   dg += Σ_rows dy⊙x·r                        (fp32, accumulated)
// dg is reduced in two fixed-order stages (per chunk of rows, then over the
// chunks) without atomics, so it is bit-identical run to run.
//
// Layout: x, y, dy, dx, base are dense row-major [n, d]; g [d]; rstd [n] fp32.
// T = float (the fp32 checks) or __nv_bfloat16 (fp32 math inside). Device
// pointers; asynchronous on `stream`.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace meshloom::cuda {

// eps: model.rms_norm_eps, rounded to float as the CPU's float model does.
template <class T>
void rmsnorm_forward(const T* x, const T* g, int64_t n, int64_t d, T* y, float* rstd, double eps,
                     cudaStream_t stream);

// dx as above (base may be null, or alias dx), and dg += the gain gradient.
// Uses a stream-ordered scratch (cudaMallocAsync) of at most 256·d floats.
template <class T>
void rmsnorm_backward(const T* dy, const T* x, const T* g, const float* rstd, const T* base,
                      int64_t n, int64_t d, T* dx, float* dg, cudaStream_t stream);

}  // namespace meshloom::cuda
