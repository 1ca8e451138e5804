// Element-type conversions on the GPU: fp32 master weights to the working
// copy the forward pass reads (bf16 or fp32), and fp32 gradient accumulators
// to the activation type. Device pointers; asynchronous on `stream`.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace meshloom::kernels {

// out[i] = To(in[i]) for i < n (round to nearest even for bf16).
// (From, To): (float, float), (float, bf16), (bf16, float).
template <class From, class To>
void convert(const From* in, int64_t n, To* out, cudaStream_t stream);

}  // namespace meshloom::kernels
