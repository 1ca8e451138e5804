// The bf16 forward on Hopper's warpgroup tensor-core instructions (wgmma,
// sm_90a): the mma.sync kernel's algorithm (flash_forward_mma.cu) with its
// products issued per warpgroup of 4 warps, 64 query rows at a time, straight
// from shared memory. mma.sync keeps at most about 60% of an H100's tensor
// cores busy; wgmma is how FlashAttention-3 and cuBLAS reach the rest.
//
// One CUDA block per (128-query tile, head): 2 warpgroups of 64 query rows.
// Per key tile (128 keys) that the mask does not hide entirely:
//   S = Q Kᵀ      wgmma m64n128k16, Q and K from swizzled shared tiles
//   mask, online softmax in base 2, in S's accumulator registers
//   O += P V     wgmma m64nDk16, P from registers (S's layout is P's A
//                fragment layout), V from shared memory (MN-major)
// K/V tiles are double-buffered with cp.async as in the mma.sync kernel, and
// a tile that every query sees skips the per-element mask. Layouts,
// descriptors and fragments: wgmma_tiles.cuh.
//
// This file is compiled for sm_90a alone (kernels/device/CMakeLists.txt);
// the launcher is only called on a compute capability 9.0 device.
#include <cmath>

#include "kernels/device/attention/flash_forward.cuh"
#include "kernels/device/attention/flash_rows.cuh"
#include "kernels/device/attention/wgmma_tiles.cuh"
#include "kernels/device/common/check.cuh"

namespace meshloom::cuda::flash {
namespace {

constexpr int kWgThreads = 256;  // 2 warpgroups
constexpr int BQ = kWgmmaBQ, BK = kWgmmaBK;
static_assert(BQ == 64 * (kWgThreads / 128), "each warpgroup owns 64 query rows");
static_assert(BK == 128, "S is one m64n128 accumulator");

// Shared memory: Q, two stages of K and V (all swizzled, each 1024-byte
// aligned), the keys' sample ids and positions.
template <int D>
struct WgSmem {
  static constexpr size_t tile_q = size_t(BQ) * D * sizeof(bf16);
  static constexpr size_t tile_kv = size_t(BK) * D * sizeof(bf16);
  static constexpr size_t q = 0;
  static constexpr size_t k = q + tile_q;
  static constexpr size_t v = k + 2 * tile_kv;
  static constexpr size_t ks = v + 2 * tile_kv;
  static constexpr size_t kp = ks + 2 * size_t(BK) * sizeof(int32_t);
  static constexpr size_t bytes = kp + 2 * size_t(BK) * sizeof(int32_t);
  static constexpr size_t alloc = bytes + 1024;  // room to align the base
  static_assert(tile_q % 1024 == 0 && tile_kv % 1024 == 0, "tiles keep 1024-byte alignment");
  static_assert(alloc <= kMaxSmemBytes, "wgmma forward tiles do not fit in shared memory");
};

// O += P V for this warpgroup's 64 rows: D = 128 or 64 columns.
template <int D>
__device__ __forceinline__ void wgmma_pv(float (&o)[D / 8][4], const uint32_t (&a)[4],
                                         uint64_t desc) {
  if constexpr (D == 128) {
    wgmma_m64n128k16_rs(o, a, desc, 1);
  } else {
    wgmma_m64n64k16_rs(o, a, desc, 1);
  }
}

template <class TO, int D>
__global__ void __launch_bounds__(kWgThreads, 1)
    flash_forward_wgmma_kernel(const FwdParams<bf16, TO> p) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __trap();  // never launched: this file is built for sm_90a only
#else
  using L = WgSmem<D>;
  constexpr int NT = BK / 8;  // 8-key n-tiles of S (m64n128)
  constexpr int DT = D / 8;   // 8-column n-tiles of O (m64nD)
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) / 1024 * 1024);
  unsigned char* sq = smem + L::q;
  unsigned char* sk = smem + L::k;
  unsigned char* sv = smem + L::v;
  int32_t* ksam = reinterpret_cast<int32_t*>(smem + L::ks);
  int32_t* kpos = reinterpret_cast<int32_t*>(smem + L::kp);

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wg = warp / 4, g = lane / 4;
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
    load_tile_sw128_async<D, kWgThreads>(sk + stage * L::tile_kv, p.k + k0 * p.ldk + kvh * D, p.ldk,
                                         krows, BK);
    load_tile_sw128_async<D, kWgThreads>(sv + stage * L::tile_kv, p.v + k0 * p.ldv + kvh * D, p.ldv,
                                         krows, BK);
    for (int c = tid; c < BK; c += kWgThreads) {
      // Keys past the end get a sample id no query has (ids are >= 0).
      ksam[stage * BK + c] = c < krows ? p.k_sample[k0 + c] : -1;
      kpos[stage * BK + c] = c < krows ? p.k_pos[k0 + c] : 0;
    }
  };

  // This thread's two query rows: r_lo = 64·wg + 16·(warp % 4) + g and r_lo + 8.
  const int r_lo = wg * 64 + (warp % 4) * 16 + g;
  int32_t qsam[2], qpos[2];
  for (int i = 0; i < 2; ++i) {
    const int r = r_lo + 8 * i;
    qsam[i] = r < rows ? p.q_sample[row0 + r] : -2;  // matches no key, not even padding
    qpos[i] = r < rows ? p.q_pos[row0 + r] : 0;
  }

  load_tile_sw128_async<D, kWgThreads>(sq, p.q + row0 * p.ldq + h * D, p.ldq, rows, BQ);
  int64_t kt = next_visible(-1);
  if (kt < n_kt) load_kv(kt, 0);
  cp_async_commit();

  float o[DT][4];
#pragma unroll
  for (int j = 0; j < DT; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY};  // running max, base-2 scaled units
  float l[2] = {0.0f, 0.0f};            // this thread's share of the running sum
  const float scale2 = p.scale * kLog2e;
  // This warpgroup's 64 rows of Q, in each 64-column half.
  const uint32_t q_addr = smem_addr(sq) + static_cast<uint32_t>(wg * 64 * 128);

  int stage = 0;
  while (kt < n_kt) {
    const int64_t nxt = next_visible(kt);
    if (nxt < n_kt) load_kv(nxt, stage ^ 1);
    cp_async_commit();
    cp_async_wait<1>();   // everything but the tile just issued has landed
    fence_proxy_async();  // ... and is visible to the tensor cores
    __syncthreads();
    const uint32_t k_addr = smem_addr(sk + stage * L::tile_kv);
    const uint32_t v_addr = smem_addr(sv + stage * L::tile_kv);

    // S = Q Kᵀ: 64 rows x BK keys per warpgroup, D/16 k steps.
    float s[NT][4];
#pragma unroll
    for (int j = 0; j < NT; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const uint32_t half = kk / 4, off = (kk % 4) * 32;
      const uint64_t da = sw128_desc(q_addr + half * BQ * 128 + off, 16, 1024);
      const uint64_t db = sw128_desc(k_addr + half * BK * 128 + off, 16, 1024);
      wgmma_m64n128k16_ss(s, da, db, 1);
    }
    wgmma_commit();
    wgmma_wait<0>();
    fence_registers(s);

    // Scale to base 2 and mask (tiles every query sees skip the mask), then
    // the online softmax per row.
    const TileRange kr = p.k_ranges[kt];
    const bool full = qr.x == qr.y && kr.x == kr.y && qr.x == kr.x && kr.w <= qr.z &&
                      (kt + 1) * BK <= p.nk && rows == BQ;
    scale_and_mask(s, scale2, full, ksam + stage * BK, kpos + stage * BK, qsam, qpos);
    online_softmax(s, m, l, o);

    // O += P V: P's A fragments are S's accumulators, 16 keys a step.
    uint32_t pf[BK / 16][4];
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) a_fragment(pf[kk], s, kk);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk)
      wgmma_pv<D>(o, pf[kk], sw128_desc(v_addr + kk * 2048, BK * 128, 1024));
    wgmma_commit();
    wgmma_wait<0>();
    fence_registers(o);
    __syncthreads();  // this stage is free for the load two tiles ahead
    stage ^= 1;
    kt = nxt;
  }
  cp_async_wait<0>();

  store_rows(p.out + row0 * p.ldo + h * D, p.ldo, p.lse + row0 * p.n_heads + h, p.n_heads, o, m, l,
             rows, r_lo);
#endif
}

template <class TO, int D>
void launch(const FwdParams<bf16, TO>& p, cudaStream_t stream) {
  launch_tiles(flash_forward_wgmma_kernel<TO, D>, p.nq, BQ, p.n_heads, kWgThreads, WgSmem<D>::alloc,
               p, stream);
}

}  // namespace

template <class TO>
void launch_forward_wgmma(const FwdParams<bf16, TO>& p, int head_dim, cudaStream_t stream) {
  if (head_dim == 64) {
    launch<TO, 64>(p, stream);
  } else {
    launch<TO, 128>(p, stream);
  }
}

template void launch_forward_wgmma<bf16>(const FwdParams<bf16, bf16>&, int, cudaStream_t);
template void launch_forward_wgmma<float>(const FwdParams<bf16, float>&, int, cudaStream_t);

}  // namespace meshloom::cuda::flash
