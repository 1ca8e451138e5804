// Element types in device code: fp32 math on float or bf16 storage. Shared by
// every .cu of kernels/ (conversions in and out of fp32, round to nearest even,
// one at a time or 8 bf16 in a 16-byte access).
#pragma once

#include <cuda_bf16.h>

#include <type_traits>

namespace meshloom::cuda {

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

// V consecutive elements to or from fp32: V = 1 (any T) or 8 bf16 in one
// 16-byte access (loads: also 8 floats in two); the address 16-byte aligned,
// see common/vector_path.hpp.
// Conversions are the scalar ones, so both paths give identical values.
template <int V, class T>
__device__ inline void load_vec(const T* p, float* out) {
  if constexpr (V == 1) {
    out[0] = to_f32(*p);
  } else if constexpr (std::is_same_v<T, float>) {
    static_assert(V == 8, "8-wide access only");
    const float4 a = reinterpret_cast<const float4*>(p)[0],
                 b = reinterpret_cast<const float4*>(p)[1];
    out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w;
    out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
  } else {
    static_assert(V == 8 && std::is_same_v<T, __nv_bfloat16>, "8-wide access is for bf16");
    const uint4 u = *reinterpret_cast<const uint4*>(p);
    const __nv_bfloat16* e = reinterpret_cast<const __nv_bfloat16*>(&u);
#pragma unroll
    for (int k = 0; k < 8; ++k) out[k] = __bfloat162float(e[k]);
  }
}

template <int V, class T>
__device__ inline void store_vec(T* p, const float* in) {
  if constexpr (V == 1) {
    *p = from_f32<T>(in[0]);
  } else {
    static_assert(V == 8 && std::is_same_v<T, __nv_bfloat16>, "8-wide access is for bf16");
    uint4 u;
    __nv_bfloat16* e = reinterpret_cast<__nv_bfloat16*>(&u);
#pragma unroll
    for (int k = 0; k < 8; ++k) e[k] = __float2bfloat16_rn(in[k]);
    *reinterpret_cast<uint4*>(p) = u;
  }
}

}  // namespace meshloom::cuda
