// The bf16 backward on Hopper's wgmma (sm_90a): the mma.sync backward's
// algorithm (flash_backward_mma.cu) with its products issued per warpgroup
// from swizzled shared tiles (layouts, descriptors, fragments:
// wgmma_tiles.cuh).
//
// One CUDA block per (128-key tile, query head): 2 warpgroups, each owning 64
// keys with their fp32 dK and dV rows in registers. Per 64-query tile that may
// see the key tile (Q, dO, lse, delta double-buffered by cp.async):
//   Sᵀ = K Qᵀ and dPᵀ = V dOᵀ      wgmma m64n64k16, all operands in shared
//   Pᵀ = exp(scale·Sᵀ − lse), dSᵀ = Pᵀ ⊙ (dPᵀ − delta)   in registers
//   dV += Pᵀ dO, dK += dSᵀ Q        wgmma m64nDk16, Pᵀ and dSᵀ from registers
//   dS to shared memory (swizzled [query][key]); dQ += scale·dS K, each
//   warpgroup D/2 columns (wgmma m64n(D/2)k16), added into global dQ with
//   fp32 atomics.
// At the end dK (times scale) and dV are added atomically into global memory:
// the query heads of one KV head (GQA) are different blocks.
//
// Compiled for sm_90a alone, like the wgmma forward.
#include <cmath>

#include "kernels/device/attention/flash_backward.cuh"
#include "kernels/device/attention/flash_rows.cuh"
#include "kernels/device/attention/wgmma_tiles.cuh"
#include "kernels/device/common/check.cuh"

namespace meshloom::cuda::flash {
namespace {

constexpr int kWgThreads = 256;  // 2 warpgroups
constexpr int BQ = kWgmmaBwdBQ, BK = kWgmmaBwdBK;
static_assert(BK == 64 * (kWgThreads / 128), "each warpgroup owns 64 keys");
static_assert(BQ == 64, "Sᵀ and dPᵀ are m64n64 accumulators; dQ is one m64 row block");

template <int D>
struct WgBwdSmem {
  static constexpr size_t tile_k = size_t(BK) * D * sizeof(bf16);
  static constexpr size_t tile_q = size_t(BQ) * D * sizeof(bf16);
  static constexpr size_t k = 0;
  static constexpr size_t v = k + tile_k;
  static constexpr size_t q = v + tile_k;                                // 2 stages
  static constexpr size_t dout = q + 2 * tile_q;                         // 2 stages
  static constexpr size_t ds = dout + 2 * tile_q;                        // [BQ][BK], swizzled
  static constexpr size_t qs = ds + size_t(BQ) * BK * sizeof(bf16);      // per stage: sample,
  static constexpr size_t qp = qs + 2 * size_t(BQ) * sizeof(int32_t);    // position,
  static constexpr size_t lse = qp + 2 * size_t(BQ) * sizeof(int32_t);   // lse·log2(e),
  static constexpr size_t delta = lse + 2 * size_t(BQ) * sizeof(float);  // delta
  static constexpr size_t bytes = delta + 2 * size_t(BQ) * sizeof(float);
  static constexpr size_t alloc = bytes + 1024;  // room to align the base
  static_assert(tile_k % 1024 == 0 && tile_q % 1024 == 0, "tiles keep 1024-byte alignment");
  static_assert(alloc <= kMaxSmemBytes, "wgmma backward tiles do not fit in shared memory");
};

// acc (64 keys x D) += A (64 x 16 fragment) · B (16 queries x D, MN-major).
template <int D>
__device__ __forceinline__ void wgmma_rs_d(float (&acc)[D / 8][4], const uint32_t (&a)[4],
                                           uint64_t desc) {
  if constexpr (D == 128) {
    wgmma_m64n128k16_rs(acc, a, desc, 1);
  } else {
    wgmma_m64n64k16_rs(acc, a, desc, 1);
  }
}

// dq (64 queries x D/2) += dS (K-major) · K (MN-major).
template <int D>
__device__ __forceinline__ void wgmma_dq(float (&dq)[D / 16][4], uint64_t desc_a, uint64_t desc_b) {
  if constexpr (D == 128) {
    wgmma_m64n64k16_ss<1>(dq, desc_a, desc_b, 1);
  } else {
    wgmma_m64n32k16_ss<1>(dq, desc_a, desc_b, 1);
  }
}

template <int D>
__global__ void __launch_bounds__(kWgThreads, 1)
    flash_backward_wgmma_kernel(const BwdParams<bf16> p) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __trap();  // never launched: this file is built for sm_90a only
#else
  using L = WgBwdSmem<D>;
  constexpr int NQ = BQ / 8;  // 8-query n-tiles of Sᵀ and dPᵀ (m64n64)
  constexpr int DT = D / 8;   // 8-column n-tiles of dK, dV (m64nD)
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) / 1024 * 1024);
  unsigned char* sk = smem + L::k;
  unsigned char* sv = smem + L::v;
  unsigned char* sq = smem + L::q;
  unsigned char* sdo = smem + L::dout;
  unsigned char* sds = smem + L::ds;
  int32_t* qsam = reinterpret_cast<int32_t*>(smem + L::qs);
  int32_t* qpos = reinterpret_cast<int32_t*>(smem + L::qp);
  float* slse = reinterpret_cast<float*>(smem + L::lse);
  float* sdelta = reinterpret_cast<float*>(smem + L::delta);

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wg = warp / 4, g = lane / 4, t = lane % 4;
  const int64_t kt = blockIdx.x;
  const int h = blockIdx.y, kvh = h / p.group, H = p.n_heads;
  const int64_t k0 = kt * BK;
  const int krows = static_cast<int>(p.nk - k0 < BK ? p.nk - k0 : BK);
  const int64_t n_qt = (p.nq + BQ - 1) / BQ;
  const TileRange kr = p.k_ranges[kt];

  auto next_visible = [&](int64_t qt) { return next_query_tile(p.q_ranges, n_qt, qt, kr); };
  int64_t qt = next_visible(-1);
  if (qt >= n_qt) return;  // no query sees these keys (the same in every thread)

  auto load_q = [&](int64_t tile, int stage) {
    const int64_t row0 = tile * BQ;
    const int rows = static_cast<int>(p.nq - row0 < BQ ? p.nq - row0 : BQ);
    load_tile_sw128_async<D, kWgThreads>(sq + stage * L::tile_q, p.q + row0 * p.ldq + h * D, p.ldq,
                                         rows, BQ);
    load_tile_sw128_async<D, kWgThreads>(sdo + stage * L::tile_q, p.dout + row0 * p.lddo + h * D,
                                         p.lddo, rows, BQ);
    for (int r = tid; r < BQ; r += kWgThreads) {
      const bool valid = r < rows;
      qsam[stage * BQ + r] = valid ? p.q_sample[row0 + r] : -2;  // matches no key
      qpos[stage * BQ + r] = valid ? p.q_pos[row0 + r] : 0;
      slse[stage * BQ + r] = valid ? p.lse[(row0 + r) * H + h] * kLog2e : 0.0f;
      sdelta[stage * BQ + r] = valid ? p.delta[(row0 + r) * H + h] : 0.0f;
    }
  };

  load_tile_sw128_async<D, kWgThreads>(sk, p.k + k0 * p.ldk + kvh * D, p.ldk, krows, BK);
  load_tile_sw128_async<D, kWgThreads>(sv, p.v + k0 * p.ldv + kvh * D, p.ldv, krows, BK);
  load_q(qt, 0);
  cp_async_commit();

  // This thread's two keys: 64·wg + 16·(warp % 4) + g and + 8 (padding keys match no query).
  const int key_lo = wg * 64 + (warp % 4) * 16 + g;
  int32_t ks[2], kp[2];
  for (int i = 0; i < 2; ++i) {
    const int key = key_lo + 8 * i;
    ks[i] = key < krows ? p.k_sample[k0 + key] : -1;
    kp[i] = key < krows ? p.k_pos[k0 + key] : 0;
  }
  float dk[DT][4], dv[DT][4];
#pragma unroll
  for (int j = 0; j < DT; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[j][e] = dv[j][e] = 0.0f;
  const float scale2 = p.scale * kLog2e;
  // This warpgroup's 64 keys of K and V (A operands), in each 64-column half.
  const uint32_t k_rows = smem_addr(sk) + static_cast<uint32_t>(wg * 64 * 128);
  const uint32_t v_rows = smem_addr(sv) + static_cast<uint32_t>(wg * 64 * 128);
  // For dQ: this warpgroup's D/2 columns of K (B, MN-major): a half of its
  // own for D = 128, 32 columns (64 bytes) into the one half for D = 64.
  const uint32_t k_cols = smem_addr(sk) + static_cast<uint32_t>(D == 128 ? wg * BK * 128 : wg * 64);
  const uint32_t ds_addr = smem_addr(sds);

  int stage = 0;
  while (qt < n_qt) {
    const int64_t nxt = next_visible(qt);
    if (nxt < n_qt) load_q(nxt, stage ^ 1);
    cp_async_commit();
    cp_async_wait<1>();   // everything but the tile just issued has landed
    fence_proxy_async();  // ... and is visible to the tensor cores
    __syncthreads();
    // Shared addresses re-read each tile: descriptors made where they are
    // used instead of dozens hoisted out of the loop, in registers dK and dV need.
    const uint32_t k_rows_t = opaque(k_rows), v_rows_t = opaque(v_rows);
    const uint32_t k_cols_t = opaque(k_cols), ds_t = opaque(ds_addr);
    const uint32_t q_t = smem_addr(sq + stage * L::tile_q);
    const uint32_t do_t = smem_addr(sdo + stage * L::tile_q);
    const int32_t* qs = qsam + stage * BQ;
    const int32_t* qp = qpos + stage * BQ;
    const float* lse2 = slse + stage * BQ;
    const float* delta = sdelta + stage * BQ;
    const int64_t row0 = qt * BQ;
    const int rows = static_cast<int>(p.nq - row0 < BQ ? p.nq - row0 : BQ);
    const TileRange qr = p.q_ranges[qt];
    const bool full =
        qr.x == qr.y && kr.x == kr.y && qr.x == kr.x && kr.w <= qr.z && rows == BQ && krows == BK;

    // Sᵀ = K Qᵀ: 64 keys x BQ queries per warpgroup.
    uint32_t pf[BQ / 16][4], dsf[BQ / 16][4];
    {
      float s[NQ][4];
#pragma unroll
      for (int j = 0; j < NQ; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        const uint32_t half = kk / 4, off = (kk % 4) * 32;
        wgmma_m64n64k16_ss(s, sw128_desc(k_rows_t + half * BK * 128 + off, 16, 1024),
                           sw128_desc(q_t + half * BQ * 128 + off, 16, 1024), 1);
      }
      wgmma_commit();
      wgmma_wait<0>();
      fence_registers(s);
      probabilities_t(s, scale2, full, ks, kp, qs, qp, lse2);  // Pᵀ from the final lse
#pragma unroll
      for (int kk = 0; kk < BQ / 16; ++kk) a_fragment(pf[kk], s, kk);
    }
    // dPᵀ = V dOᵀ, then dSᵀ = Pᵀ ⊙ (dPᵀ − delta). One product at a time: dK,
    // dV and the fp32 Sᵀ and dPᵀ together would not fit in 255 registers.
    {
      float dp[NQ][4];
#pragma unroll
      for (int j = 0; j < NQ; ++j) dp[j][0] = dp[j][1] = dp[j][2] = dp[j][3] = 0.0f;
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        const uint32_t half = kk / 4, off = (kk % 4) * 32;
        wgmma_m64n64k16_ss(dp, sw128_desc(v_rows_t + half * BK * 128 + off, 16, 1024),
                           sw128_desc(do_t + half * BQ * 128 + off, 16, 1024), 1);
      }
      wgmma_commit();
      wgmma_wait<0>();
      fence_registers(dp);
#pragma unroll
      for (int kk = 0; kk < BQ / 16; ++kk) {
#pragma unroll
        for (int r = 0; r < 4; ++r) {  // P back from its bf16 fragment, as the GPU rounds it
          const __nv_bfloat162 p2 = *reinterpret_cast<const __nv_bfloat162*>(&pf[kk][r]);
          const int j = 2 * kk + r / 2, e = 2 * (r % 2), c = j * 8 + 2 * t;
          dp[j][e] = __low2float(p2) * (dp[j][e] - delta[c]);
          dp[j][e + 1] = __high2float(p2) * (dp[j][e + 1] - delta[c + 1]);
        }
      }
      // dS to shared memory as [query][key] (swizzled, keys 64·wg.. in half wg) for dQ.
#pragma unroll
      for (int j = 0; j < NQ; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int q = j * 8 + 2 * t + (e % 2), key = key_lo + 8 * (e / 2);
          const uint32_t at = sw128_offset(BQ, q, key / 8) + (key % 8) * 2;
          *reinterpret_cast<bf16*>(sds + at) = __float2bfloat16_rn(dp[j][e]);
        }
      }
#pragma unroll
      for (int kk = 0; kk < BQ / 16; ++kk) a_fragment(dsf[kk], dp, kk);
    }
    fence_proxy_async();

    // dV += Pᵀ dO and dK += dSᵀ Q: A from registers, B MN-major, 16 queries a step.
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BQ / 16; ++kk)
      wgmma_rs_d<D>(dv, pf[kk], sw128_desc(do_t + kk * 2048, BQ * 128, 1024));
#pragma unroll
    for (int kk = 0; kk < BQ / 16; ++kk)
      wgmma_rs_d<D>(dk, dsf[kk], sw128_desc(q_t + kk * 2048, BQ * 128, 1024));
    wgmma_commit();
    __syncthreads();  // both warpgroups' dS are in shared memory

    // dQ += scale · dS K: BQ queries x this warpgroup's D/2 columns, BK/16 key steps.
    float dq[D / 16][4];
#pragma unroll
    for (int j = 0; j < D / 16; ++j) dq[j][0] = dq[j][1] = dq[j][2] = dq[j][3] = 0.0f;
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      const uint32_t half = kk / 4, off = (kk % 4) * 32;
      wgmma_dq<D>(dq, sw128_desc(ds_t + half * BQ * 128 + off, 16, 1024),
                  sw128_desc(k_cols_t + kk * 2048, BK * 128, 1024));
    }
    wgmma_commit();
    wgmma_wait<0>();
    fence_registers(dq);
    fence_registers(dk);
    fence_registers(dv);
    fence_registers(pf);  // read by the dV and dK products until the wait
    fence_registers(dsf);
    add_dq_rows(p.dq, p.lddq, p.scale, dq, row0, rows, (warp % 4) * 16 + g, h * D + wg * (D / 2));
    __syncthreads();  // dS and this stage are free for the next tiles
    stage ^= 1;
    qt = nxt;
  }
  cp_async_wait<0>();

  add_key_rows(p.dk + k0 * p.lddk + kvh * D, p.lddk, p.dv + k0 * p.lddv + kvh * D, p.lddv, p.scale,
               dk, dv, krows, key_lo);
#endif
}

template <int D>
void launch(const BwdParams<bf16>& p, cudaStream_t stream) {
  launch_tiles(flash_backward_wgmma_kernel<D>, p.nk, BK, p.n_heads, kWgThreads, WgBwdSmem<D>::alloc,
               p, stream);
}

}  // namespace

void launch_backward_wgmma(const BwdParams<bf16>& p, int head_dim, cudaStream_t stream) {
  if (head_dim == 64) {
    launch<64>(p, stream);
  } else {
    launch<128>(p, stream);
  }
}

}  // namespace meshloom::cuda::flash
