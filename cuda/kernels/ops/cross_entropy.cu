// Cross-entropy kernels (see cross_entropy.hpp): one block per row with an
// online (max, sum) per thread merged across the block, then a single-block
// fixed-order sum of the per-row losses.
#include <cuda_bf16.h>

#include <cmath>

#include "cuda/kernels/common/check.cuh"
#include "cuda/kernels/ops/cross_entropy.hpp"
#include "cuda/kernels/ops/ops_util.cuh"

namespace meshloom::kernels {

namespace {

using namespace ops_detail;

constexpr int kRowThreads = 512;
constexpr int kSumThreads = 1024;

// Merges the running (max m, Σ exp(z − m)) pair with another. Uses explicit
// rounding (no fused multiply-add), so merge(a, b) == merge(b, a) exactly and
// every lane of a butterfly ends with the same pair.
__device__ inline void merge_max_sum(float& m, float& s, float m2, float s2) {
  const float M = fmaxf(m, m2);
  if (M == -INFINITY) return;  // both empty
  s = __fadd_rn(__fmul_rn(s, expf(m - M)), __fmul_rn(s2, expf(m2 - M)));
  m = M;
}

// (max, sum) over the block, returned to every thread (blockDim.x a multiple
// of 32).
__device__ inline void block_max_sum(float& m, float& s) {
  __shared__ float part_m[32], part_s[32];
  for (int o = 16; o > 0; o >>= 1)
    merge_max_sum(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
  const int lane = int(threadIdx.x & 31u), warp = int(threadIdx.x >> 5);
  if (lane == 0) {
    part_m[warp] = m;
    part_s[warp] = s;
  }
  __syncthreads();
  const int warps = int(blockDim.x >> 5);
  m = lane < warps ? part_m[lane] : -INFINITY;
  s = lane < warps ? part_s[lane] : 0.0f;
  for (int o = 16; o > 0; o >>= 1)
    merge_max_sum(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
}

template <class T>
__global__ void cross_entropy_rows(const T* logits, int64_t ld, const int32_t* targets, int64_t V,
                                   float scale, T* dlogits, int64_t ld_out, double* row_loss) {
  const int64_t row = blockIdx.x;
  const T* z = logits + row * ld;
  T* dz = dlogits + row * ld_out;
  const int32_t target = targets[row];
  if (target < 0) {
    for (int64_t c = threadIdx.x; c < V; c += blockDim.x) dz[c] = from_f32<T>(0.0f);
    if (threadIdx.x == 0) row_loss[row] = 0.0;
    return;
  }
  // Read before block_max_sum's barrier, so before any write when in place.
  const float z_target = to_f32(z[target]);
  float m = -INFINITY, s = 0.0f;
  for (int64_t c = threadIdx.x; c < V; c += blockDim.x) {
    const float v = to_f32(z[c]);
    if (v > m) {
      s = s * expf(m - v) + 1.0f;
      m = v;
    } else if (v != -INFINITY) {
      s += expf(v - m);
    }
  }
  block_max_sum(m, s);
  const float inv = 1.0f / s;
  for (int64_t c = threadIdx.x; c < V; c += blockDim.x) {
    float p = expf(to_f32(z[c]) - m) * inv;
    if (c == target) p -= 1.0f;
    dz[c] = from_f32<T>(p * scale);
  }
  // −log p(target) = log Σ exp(z − max) − (z_target − max), as the CPU.
  if (threadIdx.x == 0) row_loss[row] = log(double(s)) - double(z_target - m);
}

// One block: thread i sums rows i, i + blockDim, ... in order, then a fixed
// tree over the block.
__global__ void sum_row_losses(const double* row_loss, const int32_t* targets, int64_t n,
                               double* loss_sum, int64_t* count) {
  double sum = 0;
  long long k = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    sum += row_loss[i];
    k += targets[i] >= 0 ? 1 : 0;
  }
  sum = block_sum(sum);
  k = block_sum(k);
  if (threadIdx.x == 0) {
    *loss_sum = sum;
    *count = int64_t(k);
  }
}

}  // namespace

template <class T>
void cross_entropy(const T* logits, int64_t ld, const int32_t* targets, int64_t n, int64_t V,
                   float scale, T* dlogits, int64_t ld_out, double* row_loss, double* loss_sum,
                   int64_t* count, cudaStream_t stream) {
  ML_CHECK(V > 0 && ld >= V && ld_out >= V, "cross_entropy: bad vocabulary or leading dimension");
  if (n > 0) {
    cross_entropy_rows<T><<<unsigned(n), threads_for(V, kRowThreads), 0, stream>>>(
        logits, ld, targets, V, scale, dlogits, ld_out, row_loss);
    CUDA_CHECK(cudaGetLastError());
  }
  sum_row_losses<<<1, kSumThreads, 0, stream>>>(row_loss, targets, n, loss_sum, count);
  CUDA_CHECK(cudaGetLastError());
}

#define ML_CROSS_ENTROPY(T)                                                                      \
  template void cross_entropy<T>(const T*, int64_t, const int32_t*, int64_t, int64_t, float, T*, \
                                 int64_t, double*, double*, int64_t*, cudaStream_t);
ML_CROSS_ENTROPY(float)
ML_CROSS_ENTROPY(__nv_bfloat16)
#undef ML_CROSS_ENTROPY

}  // namespace meshloom::kernels
