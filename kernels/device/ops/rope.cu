// RoPE kernel (see rope.hpp): one block per token, reading the token's
// position's D/2 cos/sin values from the precomputed table (no per-element
// transcendental or double math in the step).
#include <cuda_bf16.h>

#include "kernels/device/common/check.cuh"
#include "kernels/device/ops/ops_util.cuh"
#include "kernels/device/ops/rope.hpp"

namespace meshloom::cuda {

namespace {

using namespace ops_detail;

// sign = +1 forward, −1 backward (the CPU's `sign * sn[i]`).
template <class T>
__global__ void rope_rows(T* x, int64_t ld, const int32_t* pos, int heads, int half,
                          const float* cos_table, const float* sin_table, float sign) {
  const int64_t t = blockIdx.x;
  const float* cs = cos_table + int64_t(pos[t]) * half;
  const float* sn = sin_table + int64_t(pos[t]) * half;
  T* row = x + t * ld;
  const int pairs = heads * half;
  for (int e = int(threadIdx.x); e < pairs; e += int(blockDim.x)) {
    const int h = e / half, i = e - h * half;
    T* a = row + h * 2 * half + i;
    T* b = a + half;
    const float x1 = to_f32(*a), x2 = to_f32(*b), c = cs[i], s = sign * sn[i];
    *a = from_f32<T>(x1 * c - x2 * s);
    *b = from_f32<T>(x2 * c + x1 * s);
  }
}

template <class T>
void rope_launch(T* x, int64_t ld, const int32_t* pos, int64_t n, int64_t heads, int64_t head_dim,
                 const RopeAngles& angles, float sign, cudaStream_t stream) {
  ML_CHECK(head_dim % 2 == 0 && head_dim > 0, "RoPE needs an even head dimension");
  ML_CHECK(heads * head_dim <= ld, "RoPE heads do not fit in the row");
  ML_CHECK(angles.half == head_dim / 2, "RoPE table is for another head dimension");
  // The kernel's in-row index math is 32-bit.
  ML_CHECK(heads * head_dim < (int64_t(1) << 31), "RoPE row too wide");
  if (n == 0 || heads == 0) return;
  const int64_t half = head_dim / 2;
  rope_rows<T><<<unsigned(n), threads_for(heads * half), 0, stream>>>(
      x, ld, pos, int(heads), int(half), angles.cos, angles.sin, sign);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace

template <class T>
void rope_forward(T* x, int64_t ld, const int32_t* pos, int64_t n, int64_t heads, int64_t head_dim,
                  const RopeAngles& angles, cudaStream_t stream) {
  rope_launch(x, ld, pos, n, heads, head_dim, angles, 1.0f, stream);
}

template <class T>
void rope_backward(T* x, int64_t ld, const int32_t* pos, int64_t n, int64_t heads, int64_t head_dim,
                   const RopeAngles& angles, cudaStream_t stream) {
  rope_launch(x, ld, pos, n, heads, head_dim, angles, -1.0f, stream);
}

#define ML_ROPE(T)                                                                       \
  template void rope_forward<T>(T*, int64_t, const int32_t*, int64_t, int64_t, int64_t,  \
                                const RopeAngles&, cudaStream_t);                        \
  template void rope_backward<T>(T*, int64_t, const int32_t*, int64_t, int64_t, int64_t, \
                                 const RopeAngles&, cudaStream_t);
ML_ROPE(float)
ML_ROPE(__nv_bfloat16)
#undef ML_ROPE

}  // namespace meshloom::cuda
