// Element types in device code: fp32 math on float or bf16 storage. Shared by
// every .cu of kernels/ (conversions in and out of fp32, round to nearest even).
#pragma once

#include <cuda_bf16.h>

namespace meshloom::kernels {

__device__ inline float to_f32(float x) { return x; }
__device__ inline float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }

template <class T>
__device__ inline T from_f32(float x);
template <>
__device__ inline float from_f32<float>(float x) {
  return x;
}
template <>
__device__ inline __nv_bfloat16 from_f32<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

}  // namespace meshloom::kernels
