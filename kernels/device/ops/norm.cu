// RMSNorm forward and backward kernels (see norm.hpp): one block per row for
// y and dx (8 bf16 per access where rows allow it); the gain gradient by
// column, in row chunks, then over chunks.
#include <cuda_bf16.h>

#include <algorithm>

#include "base/check.hpp"
#include "kernels/device/common/check.cuh"
#include "kernels/device/common/vector_path.hpp"
#include "kernels/device/ops/norm.hpp"
#include "kernels/device/ops/ops_util.cuh"

namespace meshloom::cuda {

namespace {

using namespace ops_detail;

constexpr int64_t kMaxChunks = 256;
constexpr int kColumnThreads = 256;

// One block per row; each thread takes V consecutive columns at a time
// (V = 8: 16-byte bf16 accesses, see run_rows below).
template <class T, int V>
__global__ void rmsnorm_forward_rows(const T* x, const T* g, int d, T* y, float* rstd, float eps) {
  const int64_t row = blockIdx.x;
  const T* xr = x + row * d;
  T* yr = y + row * d;
  const int step = int(blockDim.x) * V;
  float ss = 0;
  for (int c = int(threadIdx.x) * V; c < d; c += step) {
    float v[V];
    load_vec<V>(xr + c, v);
#pragma unroll
    for (int k = 0; k < V; ++k) ss += v[k] * v[k];
  }
  ss = block_sum(ss);
  const float r = 1.0f / sqrtf(ss / float(d) + eps);
  if (threadIdx.x == 0) rstd[row] = r;
  for (int c = int(threadIdx.x) * V; c < d; c += step) {
    float v[V], gv[V], out[V];
    load_vec<V>(xr + c, v);
    load_vec<V>(g + c, gv);
#pragma unroll
    for (int k = 0; k < V; ++k) out[k] = v[k] * r * gv[k];
    store_vec<V>(yr + c, out);
  }
}

// One block per row: dx = base + r·g⊙dy − x·r³/d·Σ(dy⊙g⊙x).
template <class T, int V>
__global__ void rmsnorm_backward_rows(const T* dy, const T* x, const T* g, const float* rstd,
                                      const T* base, int d, T* dx) {
  const int64_t row = blockIdx.x;
  const T* dyr = dy + row * d;
  const T* xr = x + row * d;
  T* dxr = dx + row * d;
  const T* br = base ? base + row * d : nullptr;
  const int step = int(blockDim.x) * V;
  float dot = 0;
  for (int c = int(threadIdx.x) * V; c < d; c += step) {
    float dv[V], gv[V], xv[V];
    load_vec<V>(dyr + c, dv);
    load_vec<V>(g + c, gv);
    load_vec<V>(xr + c, xv);
#pragma unroll
    for (int k = 0; k < V; ++k) dot += dv[k] * gv[k] * xv[k];
  }
  dot = block_sum(dot);
  const float r = rstd[row];
  const float kr = r * r * r * dot / float(d);
  for (int c = int(threadIdx.x) * V; c < d; c += step) {
    float dv[V], gv[V], xv[V], b[V], out[V];
    load_vec<V>(dyr + c, dv);
    load_vec<V>(g + c, gv);
    load_vec<V>(xr + c, xv);
    if (br) {
      load_vec<V>(br + c, b);  // read before the write: base may alias dx
    } else {
#pragma unroll
      for (int k = 0; k < V; ++k) b[k] = 0.0f;
    }
#pragma unroll
    for (int k = 0; k < V; ++k) out[k] = b[k] + r * gv[k] * dv[k] - kr * xv[k];
    store_vec<V>(dxr + c, out);
  }
}

// Stage 1: partial[chunk, c] = Σ_{rows of the chunk, in order} dy·x·r.
// Grid (column tiles, chunks); one thread per column, so loads coalesce.
template <class T>
__global__ void gain_grad_partials(const T* dy, const T* x, const float* rstd, int64_t n, int64_t d,
                                   int64_t rows_per_chunk, float* partial) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= d) return;
  const int64_t chunk = blockIdx.y;
  const int64_t r0 = chunk * rows_per_chunk, r1 = std::min(n, r0 + rows_per_chunk);
  float acc = 0;
  for (int64_t i = r0; i < r1; ++i) acc += to_f32(dy[i * d + c]) * to_f32(x[i * d + c]) * rstd[i];
  partial[chunk * d + c] = acc;
}

// Stage 2: dg[c] += Σ_chunks partial[chunk, c], chunks in order.
__global__ void gain_grad_finish(const float* partial, int64_t chunks, int64_t d, float* dg) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= d) return;
  float acc = 0;
  for (int64_t k = 0; k < chunks; ++k) acc += partial[k * d + c];
  dg[c] += acc;
}

// The 16-byte path: bf16 rows of a multiple of 8 at aligned addresses.
template <class T>
bool use_vector_path(int64_t d, std::initializer_list<const void*> bases) {
  return rows_vectorizable(d, sizeof(T), bases);
}

}  // namespace

template <class T>
void rmsnorm_forward(const T* x, const T* g, int64_t n, int64_t d, T* y, float* rstd, double eps,
                     cudaStream_t stream) {
  if (n == 0 || d == 0) return;
  ML_CHECK(d < (int64_t(1) << 31), "RMSNorm row too wide for 32-bit column indices");
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    if (use_vector_path<T>(d, {x, g, y})) {
      rmsnorm_forward_rows<T, 8>
          <<<unsigned(n), threads_for(d / 8, 512), 0, stream>>>(x, g, int(d), y, rstd, float(eps));
      CUDA_CHECK(cudaGetLastError());
      return;
    }
  }
  rmsnorm_forward_rows<T, 1>
      <<<unsigned(n), threads_for(d, 512), 0, stream>>>(x, g, int(d), y, rstd, float(eps));
  CUDA_CHECK(cudaGetLastError());
}

template <class T>
void rmsnorm_backward(const T* dy, const T* x, const T* g, const float* rstd, const T* base,
                      int64_t n, int64_t d, T* dx, float* dg, cudaStream_t stream) {
  if (n == 0 || d == 0) return;
  ML_CHECK(d < (int64_t(1) << 31), "RMSNorm row too wide for 32-bit column indices");
  bool vector = false;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    vector = use_vector_path<T>(d, {dy, x, g, base, dx});
    if (vector)
      rmsnorm_backward_rows<T, 8>
          <<<unsigned(n), threads_for(d / 8, 512), 0, stream>>>(dy, x, g, rstd, base, int(d), dx);
  }
  if (!vector)
    rmsnorm_backward_rows<T, 1>
        <<<unsigned(n), threads_for(d, 512), 0, stream>>>(dy, x, g, rstd, base, int(d), dx);
  CUDA_CHECK(cudaGetLastError());

  // Chunking depends on n only, so the summation order is fixed for a shape.
  const int64_t rows_per_chunk = std::max<int64_t>(16, (n + kMaxChunks - 1) / kMaxChunks);
  const int64_t chunks = (n + rows_per_chunk - 1) / rows_per_chunk;
  float* partial = nullptr;
  CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&partial), size_t(chunks * d) * sizeof(float),
                             stream));
  const unsigned col_tiles = unsigned((d + kColumnThreads - 1) / kColumnThreads);
  gain_grad_partials<T><<<dim3(col_tiles, unsigned(chunks)), kColumnThreads, 0, stream>>>(
      dy, x, rstd, n, d, rows_per_chunk, partial);
  CUDA_CHECK(cudaGetLastError());
  gain_grad_finish<<<col_tiles, kColumnThreads, 0, stream>>>(partial, chunks, d, dg);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaFreeAsync(partial, stream));
}

#define ML_RMSNORM(T)                                                                              \
  template void rmsnorm_forward<T>(const T*, const T*, int64_t, int64_t, T*, float*, double,       \
                                   cudaStream_t);                                                  \
  template void rmsnorm_backward<T>(const T*, const T*, const T*, const float*, const T*, int64_t, \
                                    int64_t, T*, float*, cudaStream_t);
ML_RMSNORM(float)
ML_RMSNORM(__nv_bfloat16)
#undef ML_RMSNORM

}  // namespace meshloom::cuda
