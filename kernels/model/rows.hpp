// Row-block helpers on the GPU for ring attention: fp32 accumulators to and
// from the strided rows of the model's buffers. Device pointers; asynchronous
// on `stream`.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace meshloom::kernels {

// dst[i·ldd + c] = To(src[i·lds + c]) for i < n, c < width.
// (From, To): (float, float), (float, bf16).
template <class From, class To>
void convert_rows(const From* src, int64_t lds, int64_t n, int64_t width, To* dst, int64_t ldd,
                  cudaStream_t stream);

// dst[i·ldd + c] += src[i·lds + c] for i < n, c < width (fp32).
void add_rows(const float* src, int64_t lds, int64_t n, int64_t width, float* dst, int64_t ldd,
              cudaStream_t stream);

}  // namespace meshloom::kernels
