// SwiGLU kernels (see swiglu.hpp): grid-stride loops over the n·F gate
// elements, element (t, j) reading a at [t, j] and b at [t, F + j].
#include <cuda_bf16.h>

#include "cuda/kernels/common/check.cuh"
#include "cuda/kernels/ops/ops_util.cuh"
#include "cuda/kernels/ops/swiglu.hpp"

namespace meshloom::kernels {

namespace {

using namespace ops_detail;

constexpr int kThreads = 256;

__device__ inline float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

template <class T>
__global__ void swiglu_forward_elems(const T* ab, int64_t n, int64_t f, T* h) {
  const int64_t total = n * f;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = e / f, j = e % f;
    const float a = to_f32(ab[t * 2 * f + j]), b = to_f32(ab[t * 2 * f + f + j]);
    h[e] = from_f32<T>(a * sigmoid(a) * b);
  }
}

template <class T>
__global__ void swiglu_backward_elems(const T* ab, const T* dh, int64_t n, int64_t f, T* dab) {
  const int64_t total = n * f;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = e / f, j = e % f;
    const float a = to_f32(ab[t * 2 * f + j]), b = to_f32(ab[t * 2 * f + f + j]);
    const float du = to_f32(dh[e]);
    const float s = sigmoid(a);
    const float silu = a * s;
    dab[t * 2 * f + f + j] = from_f32<T>(du * silu);
    dab[t * 2 * f + j] = from_f32<T>(du * b * (s + silu * (1.0f - s)));
  }
}

}  // namespace

template <class T>
void swiglu_forward(const T* ab, int64_t n, int64_t f, T* h, cudaStream_t stream) {
  if (n == 0 || f == 0) return;
  swiglu_forward_elems<T><<<blocks_for(n * f, kThreads), kThreads, 0, stream>>>(ab, n, f, h);
  CUDA_CHECK(cudaGetLastError());
}

template <class T>
void swiglu_backward(const T* ab, const T* dh, int64_t n, int64_t f, T* dab, cudaStream_t stream) {
  if (n == 0 || f == 0) return;
  swiglu_backward_elems<T><<<blocks_for(n * f, kThreads), kThreads, 0, stream>>>(ab, dh, n, f, dab);
  CUDA_CHECK(cudaGetLastError());
}

#define ML_SWIGLU(T)                                                             \
  template void swiglu_forward<T>(const T*, int64_t, int64_t, T*, cudaStream_t); \
  template void swiglu_backward<T>(const T*, const T*, int64_t, int64_t, T*, cudaStream_t);
ML_SWIGLU(float)
ML_SWIGLU(__nv_bfloat16)
#undef ML_SWIGLU

}  // namespace meshloom::kernels
