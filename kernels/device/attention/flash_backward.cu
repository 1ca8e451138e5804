// Backward of one (query block, KV block) pair, flash-attention-2 style: one
// CUDA block per (key tile, query head) keeps its K, V tile and fp32 dK, dV
// accumulators in shared memory and walks the query tiles that may see it,
// recomputing P = exp(scale·Q Kᵀ − lse) from the FINAL lse:
//   dV += Pᵀ dO;  dP = dO Vᵀ;  dS = P ⊙ (dP − delta);
//   dK += scale·dSᵀ Q;  dQ += scale·dS K (fp32 atomics into global dQ).
// At the end dK, dV are added atomically into global memory: the query heads
// of one KV head (GQA) are different blocks that share the same dK, dV rows.
#include <cmath>

#include "kernels/device/attention/flash_attention.hpp"
#include "kernels/device/attention/flash_backward.cuh"
#include "kernels/device/attention/flash_tiles.cuh"
#include "kernels/device/common/check.cuh"

namespace meshloom::cuda {
namespace flash {
namespace {

// Shared-memory layout of the backward kernel (byte offsets). `scratch`
// holds S (then P) and dP during a step, and the step's dQ after them.
template <class T, int D>
struct BwdSmem {
  static constexpr int BQ = Tiles<T>::BQ, BK = Tiles<T>::BK;
  static constexpr int LDT = padded<T>(D);       // Q, dO, K, V tiles
  static constexpr int LDA = padded<float>(D);   // dK, dV accumulators and dQ
  static constexpr int LDS = padded<float>(BK);  // S / P and dP
  static constexpr int LDP = padded<T>(BK);      // P and dS as GEMM inputs
  static constexpr size_t kScores = 2 * tile_bytes<float>(BQ, LDS);
  static constexpr size_t kDq = tile_bytes<float>(BQ, LDA);
  static constexpr size_t k = 0;
  static constexpr size_t v = k + tile_bytes<T>(BK, LDT);
  static constexpr size_t dk = v + tile_bytes<T>(BK, LDT);
  static constexpr size_t dv = dk + tile_bytes<float>(BK, LDA);
  static constexpr size_t q = dv + tile_bytes<float>(BK, LDA);
  static constexpr size_t dO = q + tile_bytes<T>(BQ, LDT);
  static constexpr size_t pt = dO + tile_bytes<T>(BQ, LDT);
  static constexpr size_t dst = pt + tile_bytes<T>(BQ, LDP);
  static constexpr size_t scratch = dst + tile_bytes<T>(BQ, LDP);
  static constexpr size_t s = scratch;
  static constexpr size_t dp = scratch + tile_bytes<float>(BQ, LDS);
  static constexpr size_t lse = scratch + (kScores > kDq ? kScores : kDq);
  static constexpr size_t delta = lse + tile_bytes<float>(1, BQ);
  static constexpr size_t qs = delta + tile_bytes<float>(1, BQ);
  static constexpr size_t qp = qs + tile_bytes<int32_t>(1, BQ);
  static constexpr size_t ks = qp + tile_bytes<int32_t>(1, BQ);
  static constexpr size_t kp = ks + tile_bytes<int32_t>(1, BK);
  static constexpr size_t bytes = kp + tile_bytes<int32_t>(1, BK);
  static_assert(bytes <= kMaxSmemBytes, "backward tiles do not fit in shared memory");
};

template <class T, int D>
__global__ void __launch_bounds__(kThreads) flash_backward_kernel(const BwdParams<T> p) {
  using L = BwdSmem<T, D>;
  constexpr int BQ = L::BQ, BK = L::BK;
  extern __shared__ __align__(128) unsigned char smem[];
  T* sk = reinterpret_cast<T*>(smem + L::k);
  T* sv = reinterpret_cast<T*>(smem + L::v);
  float* sdk = reinterpret_cast<float*>(smem + L::dk);
  float* sdv = reinterpret_cast<float*>(smem + L::dv);
  T* sq = reinterpret_cast<T*>(smem + L::q);
  T* sdo = reinterpret_cast<T*>(smem + L::dO);
  T* spt = reinterpret_cast<T*>(smem + L::pt);
  T* sdst = reinterpret_cast<T*>(smem + L::dst);
  float* ss = reinterpret_cast<float*>(smem + L::s);
  float* sdp = reinterpret_cast<float*>(smem + L::dp);
  float* sdq = reinterpret_cast<float*>(smem + L::scratch);  // after S and dP are used
  float* slse = reinterpret_cast<float*>(smem + L::lse);
  float* sdelta = reinterpret_cast<float*>(smem + L::delta);
  int32_t* qsam = reinterpret_cast<int32_t*>(smem + L::qs);
  int32_t* qpos = reinterpret_cast<int32_t*>(smem + L::qp);
  int32_t* ksam = reinterpret_cast<int32_t*>(smem + L::ks);
  int32_t* kpos = reinterpret_cast<int32_t*>(smem + L::kp);

  const int tid = threadIdx.x;
  const int64_t kt = blockIdx.x;
  const int h = blockIdx.y, g = h / p.group, H = p.n_heads;
  const int64_t k0 = kt * BK;
  const int krows = static_cast<int>(p.nk - k0 < BK ? p.nk - k0 : BK);
  const TileRange kr = p.k_ranges[kt];

  // Skip the whole block when no query tile can see this key tile.
  const int64_t n_qt = (p.nq + BQ - 1) / BQ;
  bool any = false;
  for (int64_t qt = 0; qt < n_qt && !any; ++qt) any = may_see(p.q_ranges[qt], kr);
  if (!any) return;  // uniform over the block

  load_rows<T, D>(sk, L::LDT, p.k + k0 * p.ldk + g * D, p.ldk, krows, BK, p.vec_k);
  load_rows<T, D>(sv, L::LDT, p.v + k0 * p.ldv + g * D, p.ldv, krows, BK, p.vec_v);
  for (int c = tid; c < BK; c += kThreads) {
    ksam[c] = c < krows ? p.k_sample[k0 + c] : 0;
    kpos[c] = c < krows ? p.k_pos[k0 + c] : 0;
  }
  for (int idx = tid; idx < BK * D; idx += kThreads) {
    sdk[(idx / D) * L::LDA + idx % D] = 0.0f;
    sdv[(idx / D) * L::LDA + idx % D] = 0.0f;
  }

  for (int64_t qt = 0; qt < n_qt; ++qt) {
    if (!may_see(p.q_ranges[qt], kr)) continue;
    const int64_t row0 = qt * BQ;
    const int rows = static_cast<int>(p.nq - row0 < BQ ? p.nq - row0 : BQ);
    __syncthreads();  // the previous step's Q, dO, P, dS and dQ are no longer read
    load_rows<T, D>(sq, L::LDT, p.q + row0 * p.ldq + h * D, p.ldq, rows, BQ, p.vec_q);
    load_rows<T, D>(sdo, L::LDT, p.dout + row0 * p.lddo + h * D, p.lddo, rows, BQ, p.vec_do);
    for (int r = tid; r < BQ; r += kThreads) {
      qsam[r] = r < rows ? p.q_sample[row0 + r] : 0;
      qpos[r] = r < rows ? p.q_pos[row0 + r] : 0;
      slse[r] = r < rows ? p.lse[(row0 + r) * H + h] : -INFINITY;
      sdelta[r] = r < rows ? p.delta[(row0 + r) * H + h] : 0.0f;
    }
    __syncthreads();
    block_gemm<T, BQ, BK, D, false, true, false>(sq, L::LDT, sk, L::LDT, ss, L::LDS);
    __syncthreads();
    // P on visible pairs (0 elsewhere, and for a row whose lse is -inf).
    for (int idx = tid; idx < BQ * BK; idx += kThreads) {
      const int r = idx / BK, c = idx % BK;
      const float lse = slse[r];
      const bool visible =
          r < rows && c < krows && ksam[c] == qsam[r] && kpos[c] <= qpos[r] && lse != -INFINITY;
      const float pv = visible ? attn_exp<T>(ss[r * L::LDS + c] * p.scale - lse) : 0.0f;
      ss[r * L::LDS + c] = pv;
      spt[r * L::LDP + c] = from_float<T>(pv);
    }
    __syncthreads();
    block_gemm<T, BK, D, BQ, true, false, true>(spt, L::LDP, sdo, L::LDT, sdv, L::LDA);
    block_gemm<T, BQ, BK, D, false, true, false>(sdo, L::LDT, sv, L::LDT, sdp, L::LDS);
    __syncthreads();
    for (int idx = tid; idx < BQ * BK; idx += kThreads) {
      const int r = idx / BK, c = idx % BK;
      const float ds = ss[r * L::LDS + c] * (sdp[r * L::LDS + c] - sdelta[r]);
      sdst[r * L::LDP + c] = from_float<T>(ds);
    }
    __syncthreads();
    block_gemm<T, BK, D, BQ, true, false, true>(sdst, L::LDP, sq, L::LDT, sdk, L::LDA);
    block_gemm<T, BQ, D, BK, false, false, false>(sdst, L::LDP, sk, L::LDT, sdq, L::LDA);
    __syncthreads();
    for (int idx = tid; idx < rows * D; idx += kThreads) {
      const int r = idx / D, c = idx % D;
      atomicAdd(p.dq + (row0 + r) * p.lddq + h * D + c, p.scale * sdq[r * L::LDA + c]);
    }
  }
  __syncthreads();
  for (int idx = tid; idx < krows * D; idx += kThreads) {
    const int r = idx / D, c = idx % D;
    atomicAdd(p.dk + (k0 + r) * p.lddk + g * D + c, p.scale * sdk[r * L::LDA + c]);
    atomicAdd(p.dv + (k0 + r) * p.lddv + g * D + c, sdv[r * L::LDA + c]);
  }
}

template <class T, int D>
void launch_backward(const BwdParams<T>& p, cudaStream_t stream) {
  using L = BwdSmem<T, D>;
  launch_tiles(flash_backward_kernel<T, D>, p.nk, L::BK, p.n_heads, kThreads, L::bytes, p, stream);
}

}  // namespace
}  // namespace flash

template <class T>
void flash_attention_backward(const FlashDims& dims, const FlashQuery<T>& q, const FlashKv<T>& kv,
                              const FlashQueryGrad<T>& g, const FlashKvGrad& kv_grad,
                              cudaStream_t stream) {
  using namespace flash;
  check_dims(dims.n_heads, dims.n_kv_heads, dims.head_dim);
  if (q.n == 0 || kv.n == 0) return;
  const int D = dims.head_dim;
  BwdParams<T> p{};
  set_qkv(&p, dims, q, kv);
  p.dout = g.dout;
  p.lddo = g.lddo;
  p.lse = g.lse;
  p.delta = g.delta;
  p.dq = g.dq;
  p.lddq = g.lddq;
  p.dk = kv_grad.dk;
  p.dv = kv_grad.dv;
  p.lddk = kv_grad.lddk;
  p.lddv = kv_grad.lddv;
  p.vec_do = rows_aligned16(g.dout, g.lddo);
  // Which kernel, and so which tile sizes the skip ranges use.
  enum class Path { wmma, mma, wgmma } path = Path::wmma;
  int bq = Tiles<T>::BQ, bk = Tiles<T>::BK;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    if (use_mma_kernels() && p.vec_q && p.vec_k && p.vec_v && p.vec_do) {
      path = use_wgmma_kernels() ? Path::wgmma : Path::mma;
      bq = path == Path::wgmma ? kWgmmaBwdBQ : kMmaBwdBQ;
      bk = path == Path::wgmma ? kWgmmaBwdBK : kMmaBwdBK;
    }
  }
  TileRange* q_ranges = make_tile_ranges(q.sample, q.pos, q.n, bq, stream);
  TileRange* k_ranges = make_tile_ranges(kv.sample, kv.pos, kv.n, bk, stream);
  p.q_ranges = q_ranges;
  p.k_ranges = k_ranges;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    if (path == Path::wgmma) launch_backward_wgmma(p, D, stream);
    if (path == Path::mma) launch_backward_mma(p, D, stream);
  }
  if (path == Path::wmma) {
    if (D == 64) {
      launch_backward<T, 64>(p, stream);
    } else {
      launch_backward<T, 128>(p, stream);
    }
  }
  CUDA_CHECK(cudaFreeAsync(q_ranges, stream));
  CUDA_CHECK(cudaFreeAsync(k_ranges, stream));
}

template void flash_attention_backward<__nv_bfloat16>(const FlashDims&,
                                                      const FlashQuery<__nv_bfloat16>&,
                                                      const FlashKv<__nv_bfloat16>&,
                                                      const FlashQueryGrad<__nv_bfloat16>&,
                                                      const FlashKvGrad&, cudaStream_t);
template void flash_attention_backward<float>(const FlashDims&, const FlashQuery<float>&,
                                              const FlashKv<float>&, const FlashQueryGrad<float>&,
                                              const FlashKvGrad&, cudaStream_t);

}  // namespace meshloom::cuda
