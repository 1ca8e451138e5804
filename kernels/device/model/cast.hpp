// Element-type conversions and row blocks on the GPU: fp32 master weights to
// the working copy the forward pass reads (bf16 or fp32), fp32 accumulators
// (ring attention's output, dK/dV) to and from the strided rows of the
// model's buffers. Device pointers; asynchronous on `stream`.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace meshloom::cuda {

// out[i] = To(in[i]) for i < n (round to nearest even for bf16).
// (From, To): (float, float), (float, bf16), (bf16, float).
template <class From, class To>
void convert(const From* in, int64_t n, To* out, cudaStream_t stream);

// dst[i·ldd + c] = To(src[i·lds + c]) for i < n, c < width.
// (From, To): (float, float), (float, bf16).
template <class From, class To>
void convert_rows(const From* src, int64_t lds, int64_t n, int64_t width, To* dst, int64_t ldd,
                  cudaStream_t stream);

// dst[i·ldd + c] += float(src[i·lds + c]) for i < n, c < width; From = float
// or bf16 (cuDNN's bf16 gradients into the model's fp32 accumulators).
template <class From>
void add_rows(const From* src, int64_t lds, int64_t n, int64_t width, float* dst, int64_t ldd,
              cudaStream_t stream);

}  // namespace meshloom::cuda
