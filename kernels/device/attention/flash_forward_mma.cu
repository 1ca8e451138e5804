// The bf16 forward the way FlashAttention-2 does it: scores, probabilities
// and the output accumulator stay in registers, in the fragment layouts of
// the tensor cores' mma.sync.m16n8k16 instruction, so shared memory only
// holds Q and the K/V tiles. The WMMA kernel (flash_forward.cu) goes through
// shared memory for S, P and O after every tile; it stays for fp32, for rows
// that are not 16-byte aligned, and as the reference this one is checked
// against (set_flash_kernel).
//
// One CUDA block per (128-query tile, head), 8 warps, each owning 16 query
// rows. Per key tile (64 keys) that the mask does not hide entirely:
//   S = Q Kᵀ      (Q fragments kept in registers; K by ldmatrix)
//   mask, online softmax in base 2 (a row's 4 lanes share its max and sum)
//   O += P V     (P's S-fragments reused as A-fragments; V by ldmatrix.trans)
// K/V tiles are double-buffered with cp.async: the next visible tile loads
// while this one is computed. A tile that every query sees (one document, all
// keys at or before every query) skips the per-element mask.
// Fragment layouts and operand addressing: mma_tiles.cuh.
#include <cmath>

#include "kernels/device/attention/flash_forward.cuh"
#include "kernels/device/attention/flash_rows.cuh"
#include "kernels/device/attention/mma_tiles.cuh"
#include "kernels/device/common/check.cuh"

namespace meshloom::cuda::flash {
namespace {

constexpr int kMmaWarps = 8, kMmaThreads = kMmaWarps * 32;
constexpr int BQ = kMmaBQ, BK = kMmaBK;
static_assert(BQ == 16 * kMmaWarps, "each warp owns 16 query rows");

// Shared memory: Q, two stages of K and V, the keys' sample ids and positions.
template <int D>
struct MmaSmem {
  static constexpr int LD = D + 8;  // 16 bytes of pad: ldmatrix rows hit distinct banks
  static constexpr size_t q = 0;
  static constexpr size_t k = q + size_t(BQ) * LD * sizeof(bf16);
  static constexpr size_t v = k + 2 * size_t(BK) * LD * sizeof(bf16);
  static constexpr size_t ks = v + 2 * size_t(BK) * LD * sizeof(bf16);
  static constexpr size_t kp = ks + 2 * size_t(BK) * sizeof(int32_t);
  static constexpr size_t bytes = kp + 2 * size_t(BK) * sizeof(int32_t);
  static_assert(bytes <= kMaxSmemBytes, "mma forward tiles do not fit in shared memory");
};

template <class TO, int D>
__global__ void __launch_bounds__(kMmaThreads, 1)
    flash_forward_mma_kernel(const FwdParams<bf16, TO> p) {
  using L = MmaSmem<D>;
  constexpr int LD = L::LD;
  constexpr int NT = BK / 8;  // 8-key n-tiles of S
  constexpr int DT = D / 8;   // 8-column n-tiles of O
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* sq = reinterpret_cast<bf16*>(smem + L::q);
  bf16* sk = reinterpret_cast<bf16*>(smem + L::k);
  bf16* sv = reinterpret_cast<bf16*>(smem + L::v);
  int32_t* ksam = reinterpret_cast<int32_t*>(smem + L::ks);
  int32_t* kpos = reinterpret_cast<int32_t*>(smem + L::kp);

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane / 4;
  const int64_t qt = gridDim.x - 1 - blockIdx.x;  // latest query tiles (most keys) first
  const int h = blockIdx.y, kvh = h / p.group;
  const int64_t row0 = qt * BQ;
  const int rows = static_cast<int>(p.nq - row0 < BQ ? p.nq - row0 : BQ);
  const int64_t n_kt = (p.nk + BK - 1) / BK;
  const TileRange qr = p.q_ranges[qt];

  auto next_visible = [&](int64_t kt) { return next_key_tile(p.k_ranges, n_kt, kt, qr); };
  auto load_kv = [&](int64_t kt, int stage) {
    const int64_t k0 = kt * BK;
    const int krows = static_cast<int>(p.nk - k0 < BK ? p.nk - k0 : BK);
    load_tile_async<D, kMmaThreads>(sk + stage * BK * LD, p.k + k0 * p.ldk + kvh * D, p.ldk, krows,
                                    BK);
    load_tile_async<D, kMmaThreads>(sv + stage * BK * LD, p.v + k0 * p.ldv + kvh * D, p.ldv, krows,
                                    BK);
    for (int c = tid; c < BK; c += kMmaThreads) {
      // Keys past the end get a sample id no query has (ids are >= 0).
      ksam[stage * BK + c] = c < krows ? p.k_sample[k0 + c] : -1;
      kpos[stage * BK + c] = c < krows ? p.k_pos[k0 + c] : 0;
    }
  };

  // This thread's two query rows: r_lo = 16·warp + g and r_lo + 8.
  const int r_lo = warp * 16 + g;
  int32_t qsam[2], qpos[2];
  for (int i = 0; i < 2; ++i) {
    const int r = r_lo + 8 * i;
    qsam[i] = r < rows ? p.q_sample[row0 + r] : -2;  // matches no key, not even padding
    qpos[i] = r < rows ? p.q_pos[row0 + r] : 0;
  }

  load_tile_async<D, kMmaThreads>(sq, p.q + row0 * p.ldq + h * D, p.ldq, rows, BQ);
  int64_t kt = next_visible(-1);
  if (kt < n_kt) load_kv(kt, 0);
  cp_async_commit();

  float o[DT][4];
#pragma unroll
  for (int j = 0; j < DT; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY};  // running max, base-2 scaled units
  float l[2] = {0.0f, 0.0f};            // this thread's share of the running sum
  uint32_t qf[D / 16][4];
  bool q_loaded = false;
  const float scale2 = p.scale * kLog2e;

  int stage = 0;
  while (kt < n_kt) {
    const int64_t nxt = next_visible(kt);
    if (nxt < n_kt) load_kv(nxt, stage ^ 1);
    cp_async_commit();
    cp_async_wait<1>();  // everything but the tile just issued has landed
    __syncthreads();
    if (!q_loaded) {
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk)
        ldmatrix_x4(qf[kk], sq + (warp * 16 + lane % 16) * LD + kk * 16 + (lane / 16) * 8);
      q_loaded = true;
    }
    const bf16* k_tile = sk + stage * BK * LD;
    const bf16* v_tile = sv + stage * BK * LD;

    // S = Q Kᵀ: 16 rows x BK keys per warp.
    float s[NT][4];
#pragma unroll
    for (int j = 0; j < NT; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
    for (int nn = 0; nn < BK / 16; ++nn) {
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t b[4];  // keys nn·16 + 0..7 (b[0], b[1]) and + 8..15 (b[2], b[3])
        ldmatrix_x4(b, k_tile + (nn * 16 + lane % 8 + (lane / 16) * 8) * LD + kk * 16 +
                           ((lane / 8) % 2) * 8);
        mma_bf16(s[2 * nn], qf[kk], b[0], b[1]);
        mma_bf16(s[2 * nn + 1], qf[kk], b[2], b[3]);
      }
    }

    // Scale to base 2 and mask (tiles every query sees skip the mask), then
    // the online softmax per row.
    const TileRange kr = p.k_ranges[kt];
    const bool full = qr.x == qr.y && kr.x == kr.y && qr.x == kr.x && kr.w <= qr.z &&
                      (kt + 1) * BK <= p.nk && rows == BQ;
    scale_and_mask(s, scale2, full, ksam + stage * BK, kpos + stage * BK, qsam, qpos);
    online_softmax(s, m, l, o);

    mma_frags_by_rows<NT, DT>(o, s, v_tile, LD);  // O += P V
    __syncthreads();                              // this stage is free for the load two tiles ahead
    stage ^= 1;
    kt = nxt;
  }
  cp_async_wait<0>();

  store_rows(p.out + row0 * p.ldo + h * D, p.ldo, p.lse + row0 * p.n_heads + h, p.n_heads, o, m, l,
             rows, r_lo);
}

template <class TO, int D>
void launch(const FwdParams<bf16, TO>& p, cudaStream_t stream) {
  launch_tiles(flash_forward_mma_kernel<TO, D>, p.nq, BQ, p.n_heads, kMmaThreads, MmaSmem<D>::bytes,
               p, stream);
}

}  // namespace

template <class TO>
void launch_forward_mma(const FwdParams<bf16, TO>& p, int head_dim, cudaStream_t stream) {
  if (head_dim == 64) {
    launch<TO, 64>(p, stream);
  } else {
    launch<TO, 128>(p, stream);
  }
}

template void launch_forward_mma<bf16>(const FwdParams<bf16, bf16>&, int, cudaStream_t);
template void launch_forward_mma<float>(const FwdParams<bf16, float>&, int, cudaStream_t);

}  // namespace meshloom::cuda::flash
