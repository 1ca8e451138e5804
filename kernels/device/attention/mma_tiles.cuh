// Tensor-core building blocks of the register-tiled (FlashAttention-2 style)
// attention kernels, sm_80 and later: cp.async tile loads, ldmatrix,
// mma.sync.m16n8k16 (bf16 in, fp32 accumulate), bf16 packing, exp2.
//
// mma.sync.m16n8k16 fragments (g = lane / 4, t = lane % 4):
//   A 16x16 row-major: a0 (g, 2t..2t+1), a1 (g+8, 2t..), a2 (g, 2t+8..), a3 (g+8, 2t+8..)
//   B 16x8 (k x n):    b0 (k 2t..2t+1, n g), b1 (k 2t+8..2t+9, n g)
//   C 16x8 fp32:       c0,c1 (g, 2t..2t+1), c2,c3 (g+8, 2t..2t+1)
// Two adjacent C tiles (n 0..7, 8..15) hold exactly an A fragment's elements,
// so a result becomes the next product's A operand without leaving registers.
//
// Shared tiles are row-major bf16 with a leading dimension of cols + 8 (16
// bytes of pad): the 8 row addresses of one ldmatrix phase hit distinct banks.
// Operand addresses, for a tile stored [rows][cols] at `tile` with ld LD:
//   A (16 rows r0.., k cols k0..): ldmatrix_x4(tile + (r0 + lane%16)*LD + k0 + (lane/16)*8)
//   B with n = rows, k = cols ("K of Q Kᵀ"): ldmatrix_x4 at
//     tile + (n0 + lane%8 + (lane/16)*8)*LD + k0 + ((lane/8)%2)*8
//     -> b[0], b[1] for n0..n0+7 and b[2], b[3] for n0+8..n0+15
//   B with k = rows, n = cols ("V of P V"): ldmatrix_x4_trans at
//     tile + (k0 + lane%8 + ((lane/8)%2)*8)*LD + n0 + (lane/16)*8
//     -> b[0], b[1] for n0..n0+7 and b[2], b[3] for n0+8..n0+15
// (checked against the PTX ISA's fragment layouts with a NumPy model of
// ldmatrix and mma.)
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace meshloom::cuda::flash {

using bf16 = __nv_bfloat16;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, asynchronously; zeros when !valid.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

// c += a · b on one 16x8x16 tile.
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x (lo) in the low half
  return *reinterpret_cast<const uint32_t*>(&v);
}

__device__ __forceinline__ float fast_exp2(float x) {  // 0 for -inf
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// The A fragment of the 16-wide k step kk, from a result still in
// accumulator fragments (its n tiles 2kk and 2kk + 1), rounded to bf16.
template <int CT>
__device__ __forceinline__ void a_fragment(uint32_t (&a)[4], const float (&c)[CT][4], int kk) {
  a[0] = pack_bf16(c[2 * kk][0], c[2 * kk][1]);
  a[1] = pack_bf16(c[2 * kk][2], c[2 * kk][3]);
  a[2] = pack_bf16(c[2 * kk + 1][0], c[2 * kk + 1][1]);
  a[3] = pack_bf16(c[2 * kk + 1][2], c[2 * kk + 1][3]);
}

// acc (16 x 8·NT) += A · Bᵀ ("Q Kᵀ"): A is 16 rows of K elements at `a`
// (leading dimension lda), B is 8·NT rows of K elements at `b` (ldb).
template <int K, int NT>
__device__ __forceinline__ void mma_rows_by_rows(float (&acc)[NT][4], const bf16* a, int lda,
                                                 const bf16* b, int ldb) {
  static_assert(K % 16 == 0 && NT % 2 == 0, "16-wide k steps, 16-wide n pairs");
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) {
    uint32_t af[4];
    ldmatrix_x4(af, a + (lane % 16) * lda + kk * 16 + (lane / 16) * 8);
#pragma unroll
    for (int nn = 0; nn < NT / 2; ++nn) {
      uint32_t bf[4];
      ldmatrix_x4(
          bf, b + (nn * 16 + lane % 8 + (lane / 16) * 8) * ldb + kk * 16 + ((lane / 8) % 2) * 8);
      mma_bf16(acc[2 * nn], af, bf[0], bf[1]);
      mma_bf16(acc[2 * nn + 1], af, bf[2], bf[3]);
    }
  }
}

// acc (16 x 8·NT) += C · B ("P V"): C is a 16 x 8·CT fp32 result still in
// accumulator fragments (rounded to bf16 here), B is 8·CT rows of 8·NT
// elements at `b` (ldb), row-major [k][n].
template <int CT, int NT>
__device__ __forceinline__ void mma_frags_by_rows(float (&acc)[NT][4], const float (&c)[CT][4],
                                                  const bf16* b, int ldb) {
  static_assert(CT % 2 == 0 && NT % 2 == 0, "16-wide k steps, 16-wide n pairs");
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int kk = 0; kk < CT / 2; ++kk) {
    uint32_t af[4];
    a_fragment(af, c, kk);
#pragma unroll
    for (int nn = 0; nn < NT / 2; ++nn) {
      uint32_t bf[4];
      ldmatrix_x4_trans(
          bf, b + (kk * 16 + lane % 8 + ((lane / 8) % 2) * 8) * ldb + nn * 16 + (lane / 16) * 8);
      mma_bf16(acc[2 * nn], af, bf[0], bf[1]);
      mma_bf16(acc[2 * nn + 1], af, bf[2], bf[3]);
    }
  }
}

// Rows [0, rows) of a tile of `tile_rows` rows of D bf16 (16-byte chunks),
// zeros past `rows`.
template <int D, int kBlockThreads>
__device__ __forceinline__ void load_tile_async(bf16* dst, const bf16* src, int64_t ld_src,
                                                int rows, int tile_rows) {
  constexpr int kChunks = D / 8;
  for (int idx = threadIdx.x; idx < tile_rows * kChunks; idx += kBlockThreads) {
    const int r = idx / kChunks, c = (idx % kChunks) * 8;
    const bool valid = r < rows;
    cp_async16(dst + r * (D + 8) + c, valid ? src + r * ld_src + c : src, valid);
  }
}

}  // namespace meshloom::cuda::flash
