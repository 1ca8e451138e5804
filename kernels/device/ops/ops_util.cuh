// Device helpers shared by the kernels of kernels/device/ops/: element conversions
// (from kernels/device/common/elem.cuh), deterministic block reductions and launch
// sizes. Private to this folder (.cu files only).
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "kernels/device/common/elem.cuh"

namespace meshloom::cuda::ops_detail {

using cuda::from_f32;  // kernels/device/common/elem.cuh
using cuda::load_vec;
using cuda::store_vec;
using cuda::to_f32;

// Sum over a warp; a butterfly, so every lane ends with the same value.
template <class A>
__device__ inline A warp_sum(A v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over the block, returned to every thread. blockDim.x must be a multiple
// of 32 (at most 1024). The order of additions is fixed by the block size, so
// results are identical run to run. Every thread of the block must call it.
template <class A>
__device__ inline A block_sum(A v) {
  __shared__ A warp_part[32];
  v = warp_sum(v);
  const int lane = int(threadIdx.x & 31u), warp = int(threadIdx.x >> 5);
  if (lane == 0) warp_part[warp] = v;
  __syncthreads();
  const int warps = int(blockDim.x >> 5);
  A total = lane < warps ? warp_part[lane] : A(0);
  total = warp_sum(total);
  __syncthreads();  // warp_part may be reused by the next call
  return total;
}

// Maximum over the block, returned to every thread (same rules as
// block_sum; exact in any order).
__device__ inline float block_max(float v) {
  __shared__ float warp_part[32];
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int lane = int(threadIdx.x & 31u), warp = int(threadIdx.x >> 5);
  if (lane == 0) warp_part[warp] = v;
  __syncthreads();
  const int warps = int(blockDim.x >> 5);
  float total = lane < warps ? warp_part[lane] : warp_part[0];
  for (int o = 16; o > 0; o >>= 1) total = fmaxf(total, __shfl_xor_sync(0xffffffffu, total, o));
  __syncthreads();  // warp_part may be reused by the next call
  return total;
}

// Launch shape for kernels over [n, width] that loop rows by blockIdx.y and
// columns (in groups of V) by blockIdx.x: no index division in the kernel.
struct RowGrid {
  dim3 blocks;
  int threads;
};
inline RowGrid row_grid(int64_t n, int64_t width, int vec) {
  const int64_t groups = (width + vec - 1) / vec;
  const int threads = int(std::clamp<int64_t>((groups + 31) / 32 * 32, 32, 512));
  const int64_t x = std::min<int64_t>((groups + threads - 1) / threads, 65535);
  return {dim3(unsigned(x), unsigned(std::min<int64_t>(n, 65535))), threads};
}

// Threads for a block that walks `width` elements: a multiple of 32 in
// [32, max_threads].
inline int threads_for(int64_t width, int max_threads = 256) {
  return int(std::clamp<int64_t>((width + 31) / 32 * 32, 32, max_threads));
}

// Blocks for a grid-stride loop over `total` elements.
inline unsigned blocks_for(int64_t total, int threads) {
  return unsigned(std::clamp<int64_t>((total + threads - 1) / threads, 1, int64_t(1) << 16));
}

}  // namespace meshloom::cuda::ops_detail
