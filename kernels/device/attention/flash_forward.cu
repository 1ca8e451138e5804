// Forward of one (query block, KV block) pair: one CUDA block per (query
// tile, head) walks the key tiles with an online softmax, so only a
// BQ × BK tile of scores ever exists. Key tiles that the mask hides
// entirely (from their precomputed (sample, position) ranges) are skipped
// before any load.
//
// Per visible key tile: load K, V → S = Q Kᵀ (block_gemm) → per row (one
// warp): mask, scale, running max m and sum l, P = exp(S − m) and rescale the
// fp32 output accumulator → O += P V (block_gemm). Epilogue: O / l and
// lse = m + log l, or a zero row and -inf for a query that saw no key.
#include <cmath>

#include "kernels/device/attention/flash_attention.hpp"
#include "kernels/device/attention/flash_forward.cuh"
#include "kernels/device/attention/flash_tiles.cuh"
#include "kernels/device/common/check.cuh"

namespace meshloom::cuda {
namespace flash {
namespace {

// Shared-memory layout of the forward kernel (byte offsets).
template <class T, int D>
struct FwdSmem {
  static constexpr int BQ = Tiles<T>::BQ, BK = Tiles<T>::BK;
  static constexpr int LDT = padded<T>(D);       // Q, K, V tiles
  static constexpr int LDS = padded<float>(BK);  // scores
  static constexpr int LDP = padded<T>(BK);      // probabilities (GEMM input)
  static constexpr int LDO = padded<float>(D);   // output accumulator
  static constexpr size_t q = 0;
  static constexpr size_t k = q + tile_bytes<T>(BQ, LDT);
  static constexpr size_t v = k + tile_bytes<T>(BK, LDT);
  static constexpr size_t s = v + tile_bytes<T>(BK, LDT);
  static constexpr size_t p = s + tile_bytes<float>(BQ, LDS);
  static constexpr size_t o = p + tile_bytes<T>(BQ, LDP);
  static constexpr size_t m = o + tile_bytes<float>(BQ, LDO);
  static constexpr size_t l = m + tile_bytes<float>(1, BQ);
  static constexpr size_t qs = l + tile_bytes<float>(1, BQ);
  static constexpr size_t qp = qs + tile_bytes<int32_t>(1, BQ);
  static constexpr size_t ks = qp + tile_bytes<int32_t>(1, BQ);
  static constexpr size_t kp = ks + tile_bytes<int32_t>(1, BK);
  static constexpr size_t bytes = kp + tile_bytes<int32_t>(1, BK);
  static_assert(bytes <= kMaxSmemBytes, "forward tiles do not fit in shared memory");
  static_assert(BK % 32 == 0, "softmax gives each lane BK/32 columns");
};

template <class T, class TO, int D>
__global__ void __launch_bounds__(kThreads) flash_forward_kernel(const FwdParams<T, TO> p) {
  using L = FwdSmem<T, D>;
  constexpr int BQ = L::BQ, BK = L::BK;
  extern __shared__ __align__(128) unsigned char smem[];
  T* sq = reinterpret_cast<T*>(smem + L::q);
  T* sk = reinterpret_cast<T*>(smem + L::k);
  T* sv = reinterpret_cast<T*>(smem + L::v);
  float* ss = reinterpret_cast<float*>(smem + L::s);
  T* sp = reinterpret_cast<T*>(smem + L::p);
  float* so = reinterpret_cast<float*>(smem + L::o);
  float* sm = reinterpret_cast<float*>(smem + L::m);
  float* sl = reinterpret_cast<float*>(smem + L::l);
  int32_t* qsam = reinterpret_cast<int32_t*>(smem + L::qs);
  int32_t* qpos = reinterpret_cast<int32_t*>(smem + L::qp);
  int32_t* ksam = reinterpret_cast<int32_t*>(smem + L::ks);
  int32_t* kpos = reinterpret_cast<int32_t*>(smem + L::kp);

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  // Latest query tiles first: under the causal mask they see the most keys.
  const int64_t qt = gridDim.x - 1 - blockIdx.x;
  const int h = blockIdx.y, g = h / p.group;
  const int64_t row0 = qt * BQ;
  const int rows = static_cast<int>(p.nq - row0 < BQ ? p.nq - row0 : BQ);

  load_rows<T, D>(sq, L::LDT, p.q + row0 * p.ldq + h * D, p.ldq, rows, BQ, p.vec_q);
  for (int r = tid; r < BQ; r += kThreads) {
    qsam[r] = r < rows ? p.q_sample[row0 + r] : 0;
    qpos[r] = r < rows ? p.q_pos[row0 + r] : 0;
    sm[r] = -INFINITY;
    sl[r] = 0.0f;
  }
  for (int idx = tid; idx < BQ * D; idx += kThreads) so[(idx / D) * L::LDO + idx % D] = 0.0f;

  const TileRange qr = p.q_ranges[qt];
  const int64_t n_kt = (p.nk + BK - 1) / BK;
  for (int64_t kt = 0; kt < n_kt; ++kt) {
    if (!may_see(qr, p.k_ranges[kt])) continue;  // the same answer in every thread
    const int64_t k0 = kt * BK;
    const int krows = static_cast<int>(p.nk - k0 < BK ? p.nk - k0 : BK);
    __syncthreads();  // the previous tile's K, V, P are no longer read
    load_rows<T, D>(sk, L::LDT, p.k + k0 * p.ldk + g * D, p.ldk, krows, BK, p.vec_k);
    load_rows<T, D>(sv, L::LDT, p.v + k0 * p.ldv + g * D, p.ldv, krows, BK, p.vec_v);
    for (int c = tid; c < BK; c += kThreads) {
      ksam[c] = c < krows ? p.k_sample[k0 + c] : 0;
      kpos[c] = c < krows ? p.k_pos[k0 + c] : 0;
    }
    __syncthreads();
    block_gemm<T, BQ, BK, D, false, true, false>(sq, L::LDT, sk, L::LDT, ss, L::LDS);
    __syncthreads();
    // Online softmax, one warp per row; lane owns columns lane + 32·t.
    for (int r = warp; r < BQ; r += kWarps) {
      const bool row_valid = r < rows;
      const int32_t sam = qsam[r], pos = qpos[r];
      float x[BK / 32];
      float mx = -INFINITY;
#pragma unroll
      for (int t = 0; t < BK / 32; ++t) {
        const int c = lane + 32 * t;
        const bool visible = row_valid && c < krows && ksam[c] == sam && kpos[c] <= pos;
        x[t] = visible ? ss[r * L::LDS + c] * p.scale : -INFINITY;
        mx = fmaxf(mx, x[t]);
      }
      mx = warp_max(mx);
      const float m_old = sm[r];
      const float m_new = fmaxf(m_old, mx);
      float sum = 0.0f, corr = 1.0f;
      if (m_new == -INFINITY) {  // nothing visible yet in this row
#pragma unroll
        for (int t = 0; t < BK / 32; ++t) sp[r * L::LDP + lane + 32 * t] = from_float<T>(0.0f);
      } else {
        corr = attn_exp<T>(m_old - m_new);  // 0 when m_old = -inf (acc is 0 then)
#pragma unroll
        for (int t = 0; t < BK / 32; ++t) {
          const float e = attn_exp<T>(x[t] - m_new);  // 0 for masked entries
          sp[r * L::LDP + lane + 32 * t] = from_float<T>(e);
          sum += e;
        }
      }
      sum = warp_sum(sum);
      if (corr != 1.0f) {
        for (int c = lane; c < D; c += 32) so[r * L::LDO + c] *= corr;
      }
      // Every lane has read sm[r] above; order those reads before lane 0's
      // write (racecheck flagged the warp-synchronous hazard on an H200).
      __syncwarp();
      if (lane == 0) {
        sl[r] = sl[r] * corr + sum;
        sm[r] = m_new;
      }
    }
    __syncthreads();
    block_gemm<T, BQ, D, BK, false, false, true>(sp, L::LDP, sv, L::LDT, so, L::LDO);
  }
  __syncthreads();

  for (int idx = tid; idx < rows * D; idx += kThreads) {
    const int r = idx / D, c = idx % D;
    const float l = sl[r];
    const float val = l > 0.0f ? so[r * L::LDO + c] / l : 0.0f;
    p.out[(row0 + r) * p.ldo + h * D + c] = from_float<TO>(val);
  }
  for (int r = tid; r < rows; r += kThreads) {
    const float l = sl[r];
    p.lse[(row0 + r) * p.n_heads + h] = l > 0.0f ? sm[r] + logf(l) : -INFINITY;
  }
}

template <class T, class TO, int D>
void launch_forward(const FwdParams<T, TO>& p, cudaStream_t stream) {
  using L = FwdSmem<T, D>;
  launch_tiles(flash_forward_kernel<T, TO, D>, p.nq, L::BQ, p.n_heads, kThreads, L::bytes, p,
               stream);
}

}  // namespace
}  // namespace flash

template <class T, class TO>
void flash_attention_forward(const FlashDims& dims, const FlashQuery<T>& q, const FlashKv<T>& kv,
                             const FlashOut<TO>& res, cudaStream_t stream) {
  using namespace flash;
  check_dims(dims.n_heads, dims.n_kv_heads, dims.head_dim);
  if (q.n == 0) return;
  const int D = dims.head_dim;
  FwdParams<T, TO> p{};
  set_qkv(&p, dims, q, kv);
  p.out = res.out;
  p.ldo = res.ld;
  p.lse = res.lse;
  // Which kernel, and so which tile sizes the skip ranges use.
  enum class Path { wmma, mma, wgmma } path = Path::wmma;
  int bq = Tiles<T>::BQ, bk = Tiles<T>::BK;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    if (use_mma_kernels() && p.vec_q && p.vec_k && p.vec_v) {
      path = use_wgmma_kernels() ? Path::wgmma : Path::mma;
      bq = path == Path::wgmma ? kWgmmaBQ : kMmaBQ;
      bk = path == Path::wgmma ? kWgmmaBK : kMmaBK;
    }
  }
  TileRange* q_ranges = make_tile_ranges(q.sample, q.pos, q.n, bq, stream);
  TileRange* k_ranges = make_tile_ranges(kv.sample, kv.pos, kv.n, bk, stream);
  p.q_ranges = q_ranges;
  p.k_ranges = k_ranges;
  // With no keys the loop runs zero times and the epilogue writes zeros, -inf.
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    if (path == Path::wgmma) launch_forward_wgmma<TO>(p, D, stream);
    if (path == Path::mma) launch_forward_mma<TO>(p, D, stream);
  }
  if (path == Path::wmma) {
    if (D == 64) {
      launch_forward<T, TO, 64>(p, stream);
    } else {
      launch_forward<T, TO, 128>(p, stream);
    }
  }
  CUDA_CHECK(cudaFreeAsync(q_ranges, stream));
  CUDA_CHECK(cudaFreeAsync(k_ranges, stream));
}

template void flash_attention_forward<__nv_bfloat16, __nv_bfloat16>(
    const FlashDims&, const FlashQuery<__nv_bfloat16>&, const FlashKv<__nv_bfloat16>&,
    const FlashOut<__nv_bfloat16>&, cudaStream_t);
template void flash_attention_forward<__nv_bfloat16, float>(const FlashDims&,
                                                            const FlashQuery<__nv_bfloat16>&,
                                                            const FlashKv<__nv_bfloat16>&,
                                                            const FlashOut<float>&, cudaStream_t);
template void flash_attention_forward<float, float>(const FlashDims&, const FlashQuery<float>&,
                                                    const FlashKv<float>&, const FlashOut<float>&,
                                                    cudaStream_t);

}  // namespace meshloom::cuda
