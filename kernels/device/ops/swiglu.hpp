// The SwiGLU gate on the GPU, the twin of the CPU's swiglu rows in
// lib/model/transformer.cpp. The fused product x·[w1 | w3]ᵀ gives rows
// ab [n, 2F] = [a | b] (a = x·w1ᵀ in columns [0, F), b = x·w3ᵀ in [F, 2F)):
//   forward:  h = silu(a)⊙b,  silu(a) = a·σ(a)
//   backward: da = dh⊙b⊙(σ(a) + silu(a)·(1 − σ(a))),  db = dh⊙silu(a),
//             written to dab [n, 2F] = [da | db], the layout of ab.
// Dense row-major buffers; fp32 math. T = float or __nv_bfloat16.
// Device pointers; asynchronous on `stream`.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace meshloom::cuda {

// h [n, F] from ab [n, 2F].
template <class T>
void swiglu_forward(const T* ab, int64_t n, int64_t f, T* h, cudaStream_t stream);

// dab [n, 2F] from ab [n, 2F] and dh [n, F]. dab may alias ab (in place):
// each thread reads its a and b before writing da and db.
template <class T>
void swiglu_backward(const T* ab, const T* dh, int64_t n, int64_t f, T* dab, cudaStream_t stream);

}  // namespace meshloom::cuda
