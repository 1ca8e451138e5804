// Per-thread row steps shared by the register-tiled attention kernels, the
// mma.sync ones (flash_*_mma.cu) and the wgmma ones (flash_*_wgmma.cu). Both
// hold a warp's 16 rows in the same accumulator fragments, x[N][4] with
// x[j][e] at (row g + 8·(e / 2), column 8j + 2t + e % 2) (g = lane / 4,
// t = lane % 4; mma_tiles.cuh), so masking, the online softmax and the
// epilogues are written once here.
#pragma once

#include <cmath>

#include "kernels/device/attention/flash_tiles.cuh"
#include "kernels/device/attention/mma_tiles.cuh"

namespace meshloom::cuda::flash {

// Forward: scores scaled to base 2 and masked. Columns are keys (sample ids
// and positions ks, kp), the thread's two rows are queries (qsam, qpos);
// `full`: every query sees every key of the tile (no per-element mask).
template <int NT>
__device__ __forceinline__ void scale_and_mask(float (&s)[NT][4], float scale2, bool full,
                                               const int32_t* ks, const int32_t* kp,
                                               const int32_t (&qsam)[2], const int32_t (&qpos)[2]) {
  const int t = threadIdx.x % 4;
#pragma unroll
  for (int j = 0; j < NT; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float x = s[j][e] * scale2;
      if (!full) {
        const int i = e / 2, c = j * 8 + 2 * t + (e % 2);
        if (ks[c] != qsam[i] || kp[c] > qpos[i]) x = -INFINITY;
      }
      s[j][e] = x;
    }
  }
}

// Forward: one online-softmax step for the thread's two rows (a row's values
// are spread over its 4 lanes): s becomes exp2(s − max), the running max m
// and this thread's share l of the running sum advance, o is rescaled.
template <int NT, int DT>
__device__ __forceinline__ void online_softmax(float (&s)[NT][4], float (&m)[2], float (&l)[2],
                                               float (&o)[DT][4]) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float mx = -INFINITY;
#pragma unroll
    for (int j = 0; j < NT; ++j) mx = fmaxf(mx, fmaxf(s[j][2 * i], s[j][2 * i + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float m_new = fmaxf(m[i], mx);
    // With nothing visible yet every exponent is of -inf: use 0 as the
    // base so they give 0 (not NaN); the accumulator is still 0 then.
    const float base = m_new == -INFINITY ? 0.0f : m_new;
    const float corr = fast_exp2(m[i] - base);
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      s[j][2 * i] = fast_exp2(s[j][2 * i] - base);
      s[j][2 * i + 1] = fast_exp2(s[j][2 * i + 1] - base);
      sum += s[j][2 * i] + s[j][2 * i + 1];
    }
    l[i] = l[i] * corr + sum;
    m[i] = m_new;
#pragma unroll
    for (int j = 0; j < DT; ++j) {
      o[j][2 * i] *= corr;
      o[j][2 * i + 1] *= corr;
    }
  }
}

// Forward epilogue for the thread's rows r_lo and r_lo + 8 of a query tile
// (`rows` of them valid; out and lse point at the tile's first row, this
// head): the full row sums, O / l, and lse = ln-sum-exp of the scaled scores
// (a zero row and -inf where a query saw no key). Pointers and strides, not
// the kernel's parameters: a reference to those would copy them to the stack.
template <class TO, int DT>
__device__ __forceinline__ void store_rows(TO* out, int64_t ldo, float* lse, int64_t ld_lse,
                                           const float (&o)[DT][4], const float (&m)[2],
                                           const float (&l)[2], int rows, int r_lo) {
  const int t = threadIdx.x % 4;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float sum = l[i];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const int r = r_lo + 8 * i;
    if (r >= rows) continue;
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
#pragma unroll
    for (int j = 0; j < DT; ++j) {
      out[r * ldo + j * 8 + 2 * t] = from_float<TO>(o[j][2 * i] * inv);
      out[r * ldo + j * 8 + 2 * t + 1] = from_float<TO>(o[j][2 * i + 1] * inv);
    }
    if (t == 0) lse[r * ld_lse] = sum > 0.0f ? m[i] * kLn2 + logf(sum) : -INFINITY;
  }
}

// Backward: Pᵀ = exp2(scale2·Sᵀ − lse2) from the final lse. Rows are the
// thread's two keys (ks, kp), columns the tile's queries (qs, qp, lse2 =
// lse·log2(e)); 0 where masked or where a query saw no key.
template <int NQ>
__device__ __forceinline__ void probabilities_t(float (&s)[NQ][4], float scale2, bool full,
                                                const int32_t (&ks)[2], const int32_t (&kp)[2],
                                                const int32_t* qs, const int32_t* qp,
                                                const float* lse2) {
  const int t = threadIdx.x % 4;
#pragma unroll
  for (int j = 0; j < NQ; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = e / 2, c = j * 8 + 2 * t + (e % 2);
      const float l2 = lse2[c];
      const bool visible = full || (ks[i] == qs[c] && kp[i] <= qp[c]);
      s[j][e] = visible && l2 != -INFINITY ? fast_exp2(s[j][e] * scale2 - l2) : 0.0f;
    }
  }
}

// Backward: scale·dq of the thread's query rows r_lo and r_lo + 8 of the tile
// at row0 (`rows` valid), added into dq (stride lddq) from column col0 on.
template <int NJ>
__device__ __forceinline__ void add_dq_rows(float* dq, int64_t lddq, float scale,
                                            const float (&acc)[NJ][4], int64_t row0, int rows,
                                            int r_lo, int64_t col0) {
  const int t = threadIdx.x % 4;
#pragma unroll
  for (int j = 0; j < NJ; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = r_lo + 8 * (e / 2);
      if (r < rows)
        atomicAdd(dq + (row0 + r) * lddq + col0 + j * 8 + 2 * t + (e % 2), scale * acc[j][e]);
    }
}

// Backward: scale·dK and dV of the thread's keys key_lo and key_lo + 8
// (`krows` valid), added into dk and dv (the tile's first key, this KV head):
// the query heads of one KV head (GQA) are different blocks.
template <int DT>
__device__ __forceinline__ void add_key_rows(float* dk, int64_t lddk, float* dv, int64_t lddv,
                                             float scale, const float (&dk_acc)[DT][4],
                                             const float (&dv_acc)[DT][4], int krows, int key_lo) {
  const int t = threadIdx.x % 4;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int key = key_lo + 8 * i;
    if (key >= krows) continue;
#pragma unroll
    for (int j = 0; j < DT; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        atomicAdd(dk + key * lddk + j * 8 + 2 * t + e, scale * dk_acc[j][2 * i + e]);
        atomicAdd(dv + key * lddv + j * 8 + 2 * t + e, dv_acc[j][2 * i + e]);
      }
  }
}

}  // namespace meshloom::cuda::flash
