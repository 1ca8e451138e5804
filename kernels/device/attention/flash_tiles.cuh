// Device building blocks shared by the flash-attention kernels: tile sizes per
// element type, shared-memory row loads, one block-wide GEMM on shared-memory
// tiles (WMMA bf16 tensor cores, or plain fp32 FMA for the exact path), warp
// reductions, and per-tile (sample, position) ranges used to skip tiles that
// the document-causal mask hides entirely.
//
// Every shared-memory tile is row-major with a padded leading dimension (16
// bytes of padding per row: fewer bank conflicts, and WMMA wants rows that
// are multiples of 16 bytes and 32-byte aligned tile corners).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/device/attention/flash_attention.hpp"
#include "kernels/device/common/check.cuh"

namespace meshloom::cuda::flash {

constexpr int kThreads = 128;  // 4 warps per block in every attention kernel
constexpr int kWarps = kThreads / 32;

// Query rows (BQ) and keys (BK) per tile. The fp32 path uses smaller tiles
// so its fp32 shared-memory tiles fit beside the accumulators.
template <class T>
struct Tiles;
template <>
struct Tiles<__nv_bfloat16> {
  static constexpr int BQ = 64, BK = 64;
};
template <>
struct Tiles<float> {
  static constexpr int BQ = 32, BK = 32;
};

// Leading dimension of a shared tile of `cols` elements of U: 16 bytes of pad.
template <class U>
constexpr int padded(int cols) {
  return cols + static_cast<int>(16 / sizeof(U));
}

// Bytes of a shared tile, rounded up so the next one starts 128-byte aligned.
template <class U>
constexpr size_t tile_bytes(int rows, int ld) {
  return (static_cast<size_t>(rows) * ld * sizeof(U) + 127) / 128 * 128;
}

constexpr size_t kMaxSmemBytes = 227 * 1024;  // opt-in limit on sm_90

template <class T>
__device__ __forceinline__ float to_float(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else {
    return __bfloat162float(x);
  }
}

template <class T>
__device__ __forceinline__ T from_float(float x) {
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else {
    return __float2bfloat16_rn(x);
  }
}

// exp: the accurate one for the fp32 checks, the fast one for bf16 (its
// error is far below bf16 rounding). Both give 0 for -inf.
template <class T>
__device__ __forceinline__ float attn_exp(float x) {
  if constexpr (std::is_same_v<T, float>) {
    return expf(x);
  } else {
    return __expf(x);
  }
}

__device__ __forceinline__ float warp_max(float x) {
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}

__device__ __forceinline__ float warp_sum(float x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// Copies `rows` rows of D elements (src row r at src + r·ld_src) into a shared
// tile of tile_rows rows (leading dimension ld_dst); rows past `rows` become
// zeros. `vec`: src and ld_src allow 16-byte loads (checked by the host).
template <class T, int D>
__device__ void load_rows(T* dst, int ld_dst, const T* src, int64_t ld_src, int rows, int tile_rows,
                          bool vec) {
  if (vec) {
    constexpr int kPer = 16 / sizeof(T);  // elements per 16-byte chunk
    constexpr int kChunks = D / kPer;
    for (int idx = threadIdx.x; idx < tile_rows * kChunks; idx += blockDim.x) {
      const int r = idx / kChunks, c = (idx % kChunks) * kPer;
      uint4 val = make_uint4(0u, 0u, 0u, 0u);
      if (r < rows) val = __ldg(reinterpret_cast<const uint4*>(src + r * ld_src + c));
      *reinterpret_cast<uint4*>(dst + r * ld_dst + c) = val;
    }
  } else {
    for (int idx = threadIdx.x; idx < tile_rows * D; idx += blockDim.x) {
      const int r = idx / D, c = idx % D;
      dst[r * ld_dst + c] = r < rows ? src[r * ld_src + c] : from_float<T>(0.0f);
    }
  }
}

// Block-wide C (+)= A·B on shared tiles, C fp32 row-major [M][N] (ldc).
// A is [M][K]: stored row-major (a[i·lda + k]) or, with AT, as its transpose
// [K][M] (a[k·lda + i]). B is [K][N]: row-major (b[k·ldb + n]) or, with BT,
// stored as [N][K] (b[n·ldb + k]). ACC adds to C, otherwise C is overwritten.
// bf16: each warp takes 16×16 output tiles in turn, WMMA m16n16k16 with fp32
// accumulation. fp32: each thread computes output elements with FMAs.
// Call from all threads of the block; synchronize around it.
template <class T, int M, int N, int K, bool AT, bool BT, bool ACC>
__device__ void block_gemm(const T* a, int lda, const T* b, int ldb, float* c, int ldc) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    namespace wmma = nvcuda::wmma;
    static_assert(M % 16 == 0 && N % 16 == 0 && K % 16 == 0, "WMMA tiles are 16x16x16");
    using LayoutA = std::conditional_t<AT, wmma::col_major, wmma::row_major>;
    using LayoutB = std::conditional_t<BT, wmma::col_major, wmma::row_major>;
    constexpr int kTilesN = N / 16, kTiles = (M / 16) * kTilesN;
    for (int t = threadIdx.x / 32; t < kTiles; t += kWarps) {
      const int i = (t / kTilesN) * 16, j = (t % kTilesN) * 16;
      float* cp = c + i * ldc + j;
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      if constexpr (ACC) {
        wmma::load_matrix_sync(acc, cp, ldc, wmma::mem_row_major);
      } else {
        wmma::fill_fragment(acc, 0.0f);
      }
      for (int k = 0; k < K; k += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, LayoutA> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, LayoutB> fb;
        wmma::load_matrix_sync(fa, AT ? a + k * lda + i : a + i * lda + k, lda);
        wmma::load_matrix_sync(fb, BT ? b + j * ldb + k : b + k * ldb + j, ldb);
        wmma::mma_sync(acc, fa, fb, acc);
      }
      wmma::store_matrix_sync(cp, acc, ldc, wmma::mem_row_major);
    }
  } else {
    for (int idx = threadIdx.x; idx < M * N; idx += blockDim.x) {
      const int i = idx / N, j = idx % N;
      float sum = 0.0f;
      for (int k = 0; k < K; ++k) {
        const float av = to_float(AT ? a[k * lda + i] : a[i * lda + k]);
        const float bv = to_float(BT ? b[j * ldb + k] : b[k * ldb + j]);
        sum = fmaf(av, bv, sum);
      }
      c[i * ldc + j] = ACC ? c[i * ldc + j] + sum : sum;
    }
  }
}

// The (sample, position) ranges of one tile of rows: x = min sample,
// y = max sample, z = min position, w = max position.
using TileRange = int4;

// Whether any query of tile q can see any key of tile k. Conservative: false
// only when every pair is masked (samples disjoint, or every key position
// past every query position).
__device__ __forceinline__ bool may_see(TileRange q, TileRange k) {
  return !(k.y < q.x || k.x > q.y || k.z > q.w);
}

// The first of the n key tiles after kt that queries of range q may see (n
// if none); and the first query tile after qt that may see keys of range k.
__device__ __forceinline__ int64_t next_key_tile(const TileRange* k_ranges, int64_t n, int64_t kt,
                                                 TileRange q) {
  for (++kt; kt < n; ++kt)
    if (may_see(q, k_ranges[kt])) break;
  return kt;
}
__device__ __forceinline__ int64_t next_query_tile(const TileRange* q_ranges, int64_t n, int64_t qt,
                                                   TileRange k) {
  for (++qt; qt < n; ++qt)
    if (may_see(q_ranges[qt], k)) break;
  return qt;
}

// Host: allocates (cudaMallocAsync on `stream`) and fills the ranges of the
// ceil(n / tile) tiles of rows; the caller frees with cudaFreeAsync.
// Returns a valid one-element allocation even when n == 0.
TileRange* make_tile_ranges(const int32_t* sample, const int32_t* pos, int64_t n, int tile,
                            cudaStream_t stream);

// Host: whether 16-byte loads are safe for rows at p with leading dimension ld.
template <class T>
bool rows_aligned16(const T* p, int64_t ld) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0 && (ld * sizeof(T)) % 16 == 0;
}

// What every attention kernel reads: the queries, the keys and values, their
// tile ranges and the head layout. The forward and backward parameters
// extend it.
template <class T>
struct QkvParams {
  const T* q;
  int64_t ldq;
  const int32_t* q_sample;
  const int32_t* q_pos;
  int64_t nq;
  const T* k;
  const T* v;
  int64_t ldk, ldv;
  const int32_t* k_sample;
  const int32_t* k_pos;
  int64_t nk;
  const TileRange* q_ranges;
  const TileRange* k_ranges;
  int n_heads, group;
  float scale;
  bool vec_q, vec_k, vec_v;
};

// Host: fills *p from the call's operands, without tile ranges.
template <class T>
void set_qkv(QkvParams<T>* p, const FlashDims& dims, const FlashQuery<T>& q, const FlashKv<T>& kv) {
  p->q = q.q;
  p->ldq = q.ld;
  p->q_sample = q.sample;
  p->q_pos = q.pos;
  p->nq = q.n;
  p->k = kv.k;
  p->v = kv.v;
  p->ldk = kv.ldk;
  p->ldv = kv.ldv;
  p->k_sample = kv.sample;
  p->k_pos = kv.pos;
  p->nk = kv.n;
  p->n_heads = dims.n_heads;
  p->group = dims.n_heads / dims.n_kv_heads;
  p->scale = 1.0f / std::sqrt(static_cast<float>(dims.head_dim));
  p->vec_q = rows_aligned16(q.q, q.ld);
  p->vec_k = rows_aligned16(kv.k, kv.ldk);
  p->vec_v = rows_aligned16(kv.v, kv.ldv);
}

// Host: kernel(p) on ceil(n / tile) x heads blocks of `threads` threads with
// `smem` bytes of dynamic shared memory (the kernel's limit raised first).
template <class Params>
void launch_tiles(void (*kernel)(Params), int64_t n, int tile, int heads, int threads, size_t smem,
                  const Params& p, cudaStream_t stream) {
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(smem)));
  const dim3 grid(static_cast<unsigned>((n + tile - 1) / tile), static_cast<unsigned>(heads));
  kernel<<<grid, threads, smem, stream>>>(p);
  CUDA_CHECK(cudaGetLastError());
}

// Host: fails unless the dimensions are ones the kernels handle.
void check_dims(int n_heads, int n_kv_heads, int head_dim);

// Host: whether bf16 calls take the mma.sync kernels where their operands
// allow (set_flash_kernel), and whether they take the wgmma ones (on an sm_90).
bool use_mma_kernels();
bool use_wgmma_kernels();

}  // namespace meshloom::cuda::flash
