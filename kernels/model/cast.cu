#include <cuda_bf16.h>

#include "kernels/common/check.cuh"
#include "kernels/model/cast.hpp"

namespace meshloom::kernels {

namespace {

__device__ inline float as_float(float x) { return x; }
__device__ inline float as_float(__nv_bfloat16 x) { return __bfloat162float(x); }
template <class To>
__device__ inline To from_float(float x);
template <>
__device__ inline float from_float<float>(float x) {
  return x;
}
template <>
__device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

template <class From, class To>
__global__ void convert_kernel(const From* in, int64_t n, To* out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = from_float<To>(as_float(in[i]));
}

}  // namespace

template <class From, class To>
void convert(const From* in, int64_t n, To* out, cudaStream_t stream) {
  if (n <= 0) return;
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>((n + threads - 1) / threads, 65535);
  convert_kernel<From, To><<<unsigned(blocks), threads, 0, stream>>>(in, n, out);
  CUDA_CHECK(cudaGetLastError());
}

template void convert<float, float>(const float*, int64_t, float*, cudaStream_t);
template void convert<float, __nv_bfloat16>(const float*, int64_t, __nv_bfloat16*, cudaStream_t);
template void convert<__nv_bfloat16, float>(const __nv_bfloat16*, int64_t, float*, cudaStream_t);

}  // namespace meshloom::kernels
