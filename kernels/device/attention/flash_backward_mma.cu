// The bf16 backward the way FlashAttention-2 does it, on mma.sync tensor-core
// fragments held in registers (layouts and addressing: mma_tiles.cuh). The
// WMMA kernel (flash_backward.cu) stays for fp32, for rows that are not
// 16-byte aligned, and as the reference this one is checked against.
//
// One CUDA block per (128-key tile, query head), 8 warps, warp w owning keys
// 16w..16w+15 with its fp32 dK and dV rows in registers. Per 64-query tile
// that may see the key tile (Q, dO, lse, delta double-buffered by cp.async):
//   Sᵀ = K Qᵀ, Pᵀ = exp(scale·Sᵀ − lse)    (masked pairs and rows without a key: 0)
//   dV += Pᵀ dO                            (Pᵀ's accumulators reused as A fragments)
//   dPᵀ = V dOᵀ, dSᵀ = Pᵀ ⊙ (dPᵀ − delta)
//   dK += dSᵀ Q
//   dS goes to shared memory; dQ += scale·dS K, each warp 16 queries x D/2
//   columns, added into global dQ with fp32 atomics.
// At the end dK (times scale) and dV are added atomically into global memory:
// the query heads of one KV head (GQA) are different blocks.
#include <cmath>

#include "kernels/device/attention/flash_backward.cuh"
#include "kernels/device/attention/flash_rows.cuh"
#include "kernels/device/attention/mma_tiles.cuh"
#include "kernels/device/common/check.cuh"

namespace meshloom::cuda::flash {
namespace {

constexpr int kWarps8 = 8, kThreads8 = kWarps8 * 32;
constexpr int BQ = kMmaBwdBQ, BK = kMmaBwdBK;
static_assert(BK == 16 * kWarps8, "each warp owns 16 keys");
static_assert(BQ == 16 * (kWarps8 / 2), "for dQ, 4 row groups of 16 queries x 2 column halves");

template <int D>
struct BwdMmaSmem {
  static constexpr int LD = D + 8;    // K, V, Q, dO tiles
  static constexpr int LDS = BK + 8;  // dS [query][key]
  static constexpr size_t k = 0;
  static constexpr size_t v = k + size_t(BK) * LD * sizeof(bf16);
  static constexpr size_t q = v + size_t(BK) * LD * sizeof(bf16);         // 2 stages
  static constexpr size_t dout = q + 2 * size_t(BQ) * LD * sizeof(bf16);  // 2 stages
  static constexpr size_t ds = dout + 2 * size_t(BQ) * LD * sizeof(bf16);
  static constexpr size_t qs = ds + size_t(BQ) * LDS * sizeof(bf16);     // per stage: sample,
  static constexpr size_t qp = qs + 2 * size_t(BQ) * sizeof(int32_t);    // position,
  static constexpr size_t lse = qp + 2 * size_t(BQ) * sizeof(int32_t);   // lse·log2(e),
  static constexpr size_t delta = lse + 2 * size_t(BQ) * sizeof(float);  // delta
  static constexpr size_t bytes = delta + 2 * size_t(BQ) * sizeof(float);
  static_assert(bytes <= kMaxSmemBytes, "mma backward tiles do not fit in shared memory");
};

template <int D>
__global__ void __launch_bounds__(kThreads8, 1) flash_backward_mma_kernel(const BwdParams<bf16> p) {
  using L = BwdMmaSmem<D>;
  constexpr int LD = L::LD, LDS = L::LDS;
  constexpr int NQ = BQ / 8;  // 8-query n-tiles of Sᵀ and dPᵀ
  constexpr int DT = D / 8;   // 8-column n-tiles of dK, dV
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* sk = reinterpret_cast<bf16*>(smem + L::k);
  bf16* sv = reinterpret_cast<bf16*>(smem + L::v);
  bf16* sq = reinterpret_cast<bf16*>(smem + L::q);
  bf16* sdo = reinterpret_cast<bf16*>(smem + L::dout);
  bf16* sds = reinterpret_cast<bf16*>(smem + L::ds);
  int32_t* qsam = reinterpret_cast<int32_t*>(smem + L::qs);
  int32_t* qpos = reinterpret_cast<int32_t*>(smem + L::qp);
  float* slse = reinterpret_cast<float*>(smem + L::lse);
  float* sdelta = reinterpret_cast<float*>(smem + L::delta);

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, t = lane % 4;
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
    load_tile_async<D, kThreads8>(sq + stage * BQ * LD, p.q + row0 * p.ldq + h * D, p.ldq, rows,
                                  BQ);
    load_tile_async<D, kThreads8>(sdo + stage * BQ * LD, p.dout + row0 * p.lddo + h * D, p.lddo,
                                  rows, BQ);
    for (int r = tid; r < BQ; r += kThreads8) {
      const bool valid = r < rows;
      qsam[stage * BQ + r] = valid ? p.q_sample[row0 + r] : -2;  // matches no key
      qpos[stage * BQ + r] = valid ? p.q_pos[row0 + r] : 0;
      slse[stage * BQ + r] = valid ? p.lse[(row0 + r) * H + h] * kLog2e : 0.0f;
      sdelta[stage * BQ + r] = valid ? p.delta[(row0 + r) * H + h] : 0.0f;
    }
  };

  load_tile_async<D, kThreads8>(sk, p.k + k0 * p.ldk + kvh * D, p.ldk, krows, BK);
  load_tile_async<D, kThreads8>(sv, p.v + k0 * p.ldv + kvh * D, p.ldv, krows, BK);
  load_q(qt, 0);
  cp_async_commit();

  // This thread's two keys: 16·warp + g and + 8 (padding keys match no query).
  int32_t ks[2], kp[2];
  for (int i = 0; i < 2; ++i) {
    const int key = warp * 16 + g + 8 * i;
    ks[i] = key < krows ? p.k_sample[k0 + key] : -1;
    kp[i] = key < krows ? p.k_pos[k0 + key] : 0;
  }
  float dk[DT][4], dv[DT][4];
#pragma unroll
  for (int j = 0; j < DT; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[j][e] = dv[j][e] = 0.0f;
  const float scale2 = p.scale * kLog2e;
  const bf16* k_rows = sk + warp * 16 * LD;  // this warp's keys as A operands
  const bf16* v_rows = sv + warp * 16 * LD;

  int stage = 0;
  while (qt < n_qt) {
    const int64_t nxt = next_visible(qt);
    if (nxt < n_qt) load_q(nxt, stage ^ 1);
    cp_async_commit();
    cp_async_wait<1>();  // everything but the tile just issued has landed
    __syncthreads();
    const bf16* q_t = sq + stage * BQ * LD;
    const bf16* do_t = sdo + stage * BQ * LD;
    const int32_t* qs = qsam + stage * BQ;
    const int32_t* qp = qpos + stage * BQ;
    const float* lse2 = slse + stage * BQ;
    const float* delta = sdelta + stage * BQ;
    const int64_t row0 = qt * BQ;
    const int rows = static_cast<int>(p.nq - row0 < BQ ? p.nq - row0 : BQ);
    const TileRange qr = p.q_ranges[qt];
    const bool full =
        qr.x == qr.y && kr.x == kr.y && qr.x == kr.x && kr.w <= qr.z && rows == BQ && krows == BK;

    // Sᵀ = K Qᵀ: 16 keys x BQ queries per warp.
    float s[NQ][4];
#pragma unroll
    for (int j = 0; j < NQ; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
    mma_rows_by_rows<D, NQ>(s, k_rows, LD, q_t, LD);
    probabilities_t(s, scale2, full, ks, kp, qs, qp, lse2);  // Pᵀ from the final lse
    mma_frags_by_rows<NQ, DT>(dv, s, do_t, LD);              // dV += Pᵀ dO
    // dPᵀ = V dOᵀ, then dSᵀ = Pᵀ ⊙ (dPᵀ − delta) in place.
    float ds[NQ][4];
#pragma unroll
    for (int j = 0; j < NQ; ++j) ds[j][0] = ds[j][1] = ds[j][2] = ds[j][3] = 0.0f;
    mma_rows_by_rows<D, NQ>(ds, v_rows, LD, do_t, LD);
#pragma unroll
    for (int j = 0; j < NQ; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) ds[j][e] = s[j][e] * (ds[j][e] - delta[j * 8 + 2 * t + (e % 2)]);
    // dK += dSᵀ Q; dS to shared memory as [query][key] for dQ.
    mma_frags_by_rows<NQ, DT>(dk, ds, q_t, LD);
#pragma unroll
    for (int j = 0; j < NQ; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        sds[(j * 8 + 2 * t + (e % 2)) * LDS + warp * 16 + g + 8 * (e / 2)] =
            __float2bfloat16_rn(ds[j][e]);
    __syncthreads();

    // dQ += scale · dS K: warp w takes queries 16·(w % 4).. and columns (w / 4)·D/2..
    {
      const int qr0 = (warp % 4) * 16, c0 = (warp / 4) * (D / 2);
      float dq[D / 16][4];
#pragma unroll
      for (int j = 0; j < D / 16; ++j) dq[j][0] = dq[j][1] = dq[j][2] = dq[j][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < BK / 16; ++kk) {
        uint32_t a[4];
        ldmatrix_x4(a, sds + (qr0 + lane % 16) * LDS + kk * 16 + (lane / 16) * 8);
#pragma unroll
        for (int dd = 0; dd < D / 32; ++dd) {
          uint32_t b[4];
          ldmatrix_x4_trans(b, sk + (kk * 16 + lane % 8 + ((lane / 8) % 2) * 8) * LD + c0 +
                                   dd * 16 + (lane / 16) * 8);
          mma_bf16(dq[2 * dd], a, b[0], b[1]);
          mma_bf16(dq[2 * dd + 1], a, b[2], b[3]);
        }
      }
      add_dq_rows(p.dq, p.lddq, p.scale, dq, row0, rows, qr0 + g, h * D + c0);
    }
    __syncthreads();  // dS and this stage are free for the next tiles
    stage ^= 1;
    qt = nxt;
  }
  cp_async_wait<0>();

  add_key_rows(p.dk + k0 * p.lddk + kvh * D, p.lddk, p.dv + k0 * p.lddv + kvh * D, p.lddv, p.scale,
               dk, dv, krows, warp * 16 + g);
}

template <int D>
void launch(const BwdParams<bf16>& p, cudaStream_t stream) {
  launch_tiles(flash_backward_mma_kernel<D>, p.nk, BK, p.n_heads, kThreads8, BwdMmaSmem<D>::bytes,
               p, stream);
}

}  // namespace

void launch_backward_mma(const BwdParams<bf16>& p, int head_dim, cudaStream_t stream) {
  if (head_dim == 64) {
    launch<64>(p, stream);
  } else {
    launch<128>(p, stream);
  }
}

}  // namespace meshloom::cuda::flash
