// RoPE kernel (see rope.hpp): one block per token. The block first computes
// the token's D/2 cos/sin values (double, as the CPU) into shared memory, then
// rotates all its heads with them, so each angle is computed once per token.
#include <cuda_bf16.h>

#include "cuda/kernels/common/check.cuh"
#include "cuda/kernels/ops/ops_util.cuh"
#include "cuda/kernels/ops/rope.hpp"

namespace meshloom::kernels {

namespace {

using namespace ops_detail;

// sign = +1 forward, −1 backward (the CPU's `sign * sn[i]`).
template <class T>
__global__ void rope_rows(T* x, int64_t ld, const int32_t* pos, int heads, int head_dim,
                          double theta, float sign) {
  extern __shared__ float table[];  // cos [half] | sin [half]
  const int half = head_dim / 2;
  float* cs = table;
  float* sn = table + half;
  const int64_t t = blockIdx.x;
  const double p = double(pos[t]);
  for (int i = int(threadIdx.x); i < half; i += int(blockDim.x)) {
    const double freq = pow(theta, -2.0 * double(i) / double(head_dim));
    double s, c;
    sincos(p * freq, &s, &c);
    cs[i] = float(c);
    sn[i] = sign * float(s);
  }
  __syncthreads();
  T* row = x + t * ld;
  const int pairs = heads * half;
  for (int e = int(threadIdx.x); e < pairs; e += int(blockDim.x)) {
    const int h = e / half, i = e % half;
    T* a = row + int64_t(h) * head_dim + i;
    T* b = a + half;
    const float x1 = to_f32(*a), x2 = to_f32(*b), c = cs[i], s = sn[i];
    *a = from_f32<T>(x1 * c - x2 * s);
    *b = from_f32<T>(x2 * c + x1 * s);
  }
}

template <class T>
void rope_launch(T* x, int64_t ld, const int32_t* pos, int64_t n, int64_t heads, int64_t head_dim,
                 double theta, float sign, cudaStream_t stream) {
  ML_CHECK(head_dim % 2 == 0 && head_dim > 0, "RoPE needs an even head dimension");
  ML_CHECK(heads * head_dim <= ld, "RoPE heads do not fit in the row");
  if (n == 0 || heads == 0) return;
  const int64_t half = head_dim / 2;
  const size_t shared = size_t(2 * half) * sizeof(float);
  rope_rows<T><<<unsigned(n), threads_for(heads * half), shared, stream>>>(
      x, ld, pos, int(heads), int(head_dim), theta, sign);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace

template <class T>
void rope_forward(T* x, int64_t ld, const int32_t* pos, int64_t n, int64_t heads, int64_t head_dim,
                  double theta, cudaStream_t stream) {
  rope_launch(x, ld, pos, n, heads, head_dim, theta, 1.0f, stream);
}

template <class T>
void rope_backward(T* x, int64_t ld, const int32_t* pos, int64_t n, int64_t heads, int64_t head_dim,
                   double theta, cudaStream_t stream) {
  rope_launch(x, ld, pos, n, heads, head_dim, theta, -1.0f, stream);
}

#define ML_ROPE(T)                                                                               \
  template void rope_forward<T>(T*, int64_t, const int32_t*, int64_t, int64_t, int64_t, double,  \
                                cudaStream_t);                                                   \
  template void rope_backward<T>(T*, int64_t, const int32_t*, int64_t, int64_t, int64_t, double, \
                                 cudaStream_t);
ML_ROPE(float)
ML_ROPE(__nv_bfloat16)
#undef ML_ROPE

}  // namespace meshloom::kernels
