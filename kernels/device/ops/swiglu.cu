// SwiGLU kernels (see swiglu.hpp): blocks loop over rows (blockIdx.y) and
// groups of V columns (blockIdx.x), reading a at [t, j] and b at [t, F + j].
// V = 8 (16-byte accesses) for bf16 rows that allow it, else 1; the values
// are the same either way.
#include <cuda_bf16.h>

#include "base/check.hpp"
#include "kernels/device/common/check.cuh"
#include "kernels/device/common/vector_path.hpp"
#include "kernels/device/ops/ops_util.cuh"
#include "kernels/device/ops/swiglu.hpp"

namespace meshloom::cuda {

namespace {

using namespace ops_detail;

__device__ inline float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

template <class T, int V>
__global__ void swiglu_forward_rows(const T* ab, int64_t n, int f, T* h) {
  for (int64_t t = blockIdx.y; t < n; t += gridDim.y) {
    const T* a_row = ab + t * 2 * f;
    T* h_row = h + t * f;
    for (int j = (int(blockIdx.x) * int(blockDim.x) + int(threadIdx.x)) * V; j < f;
         j += int(gridDim.x) * int(blockDim.x) * V) {
      float a[V], b[V], out[V];
      load_vec<V>(a_row + j, a);
      load_vec<V>(a_row + f + j, b);
#pragma unroll
      for (int k = 0; k < V; ++k) out[k] = a[k] * sigmoid(a[k]) * b[k];
      store_vec<V>(h_row + j, out);
    }
  }
}

template <class T, int V>
__global__ void swiglu_backward_rows(const T* ab, const T* dh, int64_t n, int f, T* dab) {
  for (int64_t t = blockIdx.y; t < n; t += gridDim.y) {
    const T* a_row = ab + t * 2 * f;
    const T* dh_row = dh + t * f;
    T* d_row = dab + t * 2 * f;
    for (int j = (int(blockIdx.x) * int(blockDim.x) + int(threadIdx.x)) * V; j < f;
         j += int(gridDim.x) * int(blockDim.x) * V) {
      float a[V], b[V], du[V], da[V], db[V];
      load_vec<V>(a_row + j, a);
      load_vec<V>(a_row + f + j, b);
      load_vec<V>(dh_row + j, du);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const float s = sigmoid(a[k]);
        const float silu = a[k] * s;
        db[k] = du[k] * silu;
        da[k] = du[k] * b[k] * (s + silu * (1.0f - s));
      }
      store_vec<V>(d_row + f + j, db);
      store_vec<V>(d_row + j, da);
    }
  }
}

// The 16-byte path: bf16 rows of a width that is a multiple of 8 at aligned
// addresses (the rows of ab are 2F wide, so they are aligned too).
template <class T>
bool use_vector_path(int64_t f, std::initializer_list<const void*> bases) {
  return std::is_same_v<T, __nv_bfloat16> && rows_vectorizable(f, sizeof(T), bases);
}

template <class T, int V>
void launch_forward(const T* ab, int64_t n, int64_t f, T* h, cudaStream_t stream) {
  const RowGrid g = row_grid(n, f, V);
  swiglu_forward_rows<T, V><<<g.blocks, g.threads, 0, stream>>>(ab, n, int(f), h);
}

template <class T, int V>
void launch_backward(const T* ab, const T* dh, int64_t n, int64_t f, T* dab, cudaStream_t stream) {
  const RowGrid g = row_grid(n, f, V);
  swiglu_backward_rows<T, V><<<g.blocks, g.threads, 0, stream>>>(ab, dh, n, int(f), dab);
}

}  // namespace

template <class T>
void swiglu_forward(const T* ab, int64_t n, int64_t f, T* h, cudaStream_t stream) {
  if (n == 0 || f == 0) return;
  ML_CHECK(2 * f < (int64_t(1) << 31), "SwiGLU row too wide for 32-bit column indices");
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    if (use_vector_path<T>(f, {ab, h})) {
      launch_forward<T, 8>(ab, n, f, h, stream);
      CUDA_CHECK(cudaGetLastError());
      return;
    }
  }
  launch_forward<T, 1>(ab, n, f, h, stream);
  CUDA_CHECK(cudaGetLastError());
}

template <class T>
void swiglu_backward(const T* ab, const T* dh, int64_t n, int64_t f, T* dab, cudaStream_t stream) {
  if (n == 0 || f == 0) return;
  ML_CHECK(2 * f < (int64_t(1) << 31), "SwiGLU row too wide for 32-bit column indices");
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    if (use_vector_path<T>(f, {ab, dh, dab})) {
      launch_backward<T, 8>(ab, dh, n, f, dab, stream);
      CUDA_CHECK(cudaGetLastError());
      return;
    }
  }
  launch_backward<T, 1>(ab, dh, n, f, dab, stream);
  CUDA_CHECK(cudaGetLastError());
}

#define ML_SWIGLU(T)                                                             \
  template void swiglu_forward<T>(const T*, int64_t, int64_t, T*, cudaStream_t); \
  template void swiglu_backward<T>(const T*, const T*, int64_t, int64_t, T*, cudaStream_t);
ML_SWIGLU(float)
ML_SWIGLU(__nv_bfloat16)
#undef ML_SWIGLU

}  // namespace meshloom::cuda
