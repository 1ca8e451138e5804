// RMSNorm forward and backward kernels (see norm.hpp): one block per row for
// y and dx; the gain gradient by column, in row chunks, then over chunks.
#include <cuda_bf16.h>

#include <algorithm>

#include "cuda/kernels/common/check.cuh"
#include "cuda/kernels/ops/norm.hpp"
#include "cuda/kernels/ops/ops_util.cuh"

namespace meshloom::kernels {

namespace {

using namespace ops_detail;

constexpr float kNormEps = 1e-5f;  // the CPU's static_cast<float>(1e-5)
constexpr int64_t kMaxChunks = 256;
constexpr int kColumnThreads = 256;

// One block per row.
template <class T>
__global__ void rmsnorm_forward_rows(const T* x, const T* g, int64_t d, T* y, float* rstd) {
  const int64_t row = blockIdx.x;
  const T* xr = x + row * d;
  T* yr = y + row * d;
  float ss = 0;
  for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
    const float v = to_f32(xr[c]);
    ss += v * v;
  }
  ss = block_sum(ss);
  const float r = 1.0f / sqrtf(ss / float(d) + kNormEps);
  if (threadIdx.x == 0) rstd[row] = r;
  for (int64_t c = threadIdx.x; c < d; c += blockDim.x)
    yr[c] = from_f32<T>(to_f32(xr[c]) * r * to_f32(g[c]));
}

// One block per row: dx = base + r·g⊙dy − x·r³/d·Σ(dy⊙g⊙x).
template <class T>
__global__ void rmsnorm_backward_rows(const T* dy, const T* x, const T* g, const float* rstd,
                                      const T* base, int64_t d, T* dx) {
  const int64_t row = blockIdx.x;
  const T* dyr = dy + row * d;
  const T* xr = x + row * d;
  T* dxr = dx + row * d;
  const T* br = base ? base + row * d : nullptr;
  float dot = 0;
  for (int64_t c = threadIdx.x; c < d; c += blockDim.x)
    dot += to_f32(dyr[c]) * to_f32(g[c]) * to_f32(xr[c]);
  dot = block_sum(dot);
  const float r = rstd[row];
  const float k = r * r * r * dot / float(d);
  for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
    const float b = br ? to_f32(br[c]) : 0.0f;  // read before the write: base may alias dx
    dxr[c] = from_f32<T>(b + r * to_f32(g[c]) * to_f32(dyr[c]) - k * to_f32(xr[c]));
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

}  // namespace

template <class T>
void rmsnorm_forward(const T* x, const T* g, int64_t n, int64_t d, T* y, float* rstd,
                     cudaStream_t stream) {
  if (n == 0 || d == 0) return;
  rmsnorm_forward_rows<T><<<unsigned(n), threads_for(d, 512), 0, stream>>>(x, g, d, y, rstd);
  CUDA_CHECK(cudaGetLastError());
}

template <class T>
void rmsnorm_backward(const T* dy, const T* x, const T* g, const float* rstd, const T* base,
                      int64_t n, int64_t d, T* dx, float* dg, cudaStream_t stream) {
  if (n == 0 || d == 0) return;
  rmsnorm_backward_rows<T>
      <<<unsigned(n), threads_for(d, 512), 0, stream>>>(dy, x, g, rstd, base, d, dx);
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
  template void rmsnorm_forward<T>(const T*, const T*, int64_t, int64_t, T*, float*,               \
                                   cudaStream_t);                                                  \
  template void rmsnorm_backward<T>(const T*, const T*, const T*, const float*, const T*, int64_t, \
                                    int64_t, T*, float*, cudaStream_t);
ML_RMSNORM(float)
ML_RMSNORM(__nv_bfloat16)
#undef ML_RMSNORM

}  // namespace meshloom::kernels
