// Hopper (sm_90a) building blocks of the wgmma attention kernels: shared
// tiles in the tensor cores' 128-byte swizzled layout, their matrix
// descriptors, and warpgroup-wide wgmma.mma_async (bf16 in, fp32 accumulate).
//
// Shared tiles. A [rows][D] bf16 tile is stored as D/64 column halves of
// [rows][64] (one 128-byte line a row); each half starts 1024-byte aligned,
// and the 16-byte chunk c of row r sits at chunk c ^ (r % 8) of its line
// (Swizzle<3,4,3>: what 128B swizzling reads, so ldmatrix-free and free of
// bank conflicts). Element (r, col) of a tile at `base` with `rows` rows:
//   base + (col / 64)·rows·128 + r·128 + (((col % 64) / 8) ^ (r % 8))·16 + (col % 8)·2
//
// Descriptors (PTX ISA, "Matrix Descriptor Format"; canonical layouts in CuTe
// notation, T = 8 bf16 per 16 bytes):
//   K-major (A = Q of Q Kᵀ, B = K of Q Kᵀ): ((8,m),(T,2k)):((8T,SBO),(1,T)):
//     rows 8 apart by SBO = 1024 bytes, K contiguous in the line; the 16-wide
//     k step s of a half starts at line offset 32·s bytes. LBO is unused (1).
//   MN-major (B = V of P V, N = head dim): ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO)):
//     N contiguous in the line, 64-column halves LBO = rows·128 bytes apart,
//     8 keys SBO = 1024 bytes apart; the 16-key step s starts at 2048·s bytes.
// The swizzle applies to absolute shared addresses, hence the 1024-byte
// alignment of every half (base offset field 0).
//
// Register layouts (per warp w of the warpgroup, g = lane / 4, t = lane % 4),
// the same as mma.sync.m16n8k16 repeated (mma_tiles.cuh):
//   accumulator d of m64nN: d[4j + e] = (row 16w + g + 8·(e / 2), col 8j + 2t + e % 2)
//   A fragment of m64nNk16: a0 (16w + g, 2t..), a1 (+8 rows), a2 (cols 2t+8..), a3 (both)
// so a score accumulator becomes P's A fragments without leaving registers.
// wgmma_emulation.py checks the tile writes against these descriptors.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/attention/mma_tiles.cuh"

namespace meshloom::kernels::flash {

// Byte offset of 16-byte chunk `chunk` (0 .. D/8) of row r in a swizzled
// tile of `rows` rows.
__device__ __forceinline__ uint32_t sw128_offset(int rows, int r, int chunk) {
  return static_cast<uint32_t>((chunk / 8) * rows * 128 + r * 128 + (((chunk % 8) ^ (r % 8)) * 16));
}

// Rows [0, rows) of a [tile_rows][D] tile at `dst` (1024-byte aligned),
// swizzled; zeros past `rows`.
template <int D, int kBlockThreads>
__device__ __forceinline__ void load_tile_sw128_async(unsigned char* dst, const bf16* src,
                                                      int64_t ld_src, int rows, int tile_rows) {
  constexpr int kChunks = D / 8;
  for (int idx = threadIdx.x; idx < tile_rows * kChunks; idx += kBlockThreads) {
    const int r = idx / kChunks, c = idx % kChunks;
    const bool valid = r < rows;
    cp_async16(dst + sw128_offset(tile_rows, r, c), valid ? src + r * ld_src + c * 8 : src, valid);
  }
}

// A 128-byte-swizzle matrix descriptor.
__device__ __forceinline__ uint64_t sw128_desc(uint32_t smem_address, uint32_t lbo_bytes,
                                               uint32_t sbo_bytes) {
  uint64_t d = (smem_address & 0x3FFFFu) >> 4;
  d |= static_cast<uint64_t>((lbo_bytes & 0x3FFFFu) >> 4) << 16;
  d |= static_cast<uint64_t>((sbo_bytes & 0x3FFFFu) >> 4) << 32;
  d |= uint64_t{1} << 62;  // 128-byte swizzle
  return d;
}

// x, which the compiler may not assume invariant: keeps values derived from
// it (descriptors) from being hoisted out of a loop into registers.
__device__ __forceinline__ uint32_t opaque(uint32_t x) {
  asm volatile("" : "+r"(x));
  return x;
}

// Ordering between ordinary shared-memory writes (cp.async included) and the
// tensor cores' reads (the async proxy): each writer fences, then a barrier.
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// Before a warpgroup's wgmma reads registers that ordinary code wrote.
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// The compiler must not move accumulator reads or writes across the
// asynchronous wgmma that owns them, nor reuse A-fragment registers it is
// still reading.
template <int N>
__device__ __forceinline__ void fence_registers(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
template <int N>
__device__ __forceinline__ void fence_registers(uint32_t (&a)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) asm volatile("" : "+r"(a[i][j])::"memory");
}

// The wgmma instructions used, operand lists written out (inline asm has no
// loops). `accumulate` 0: d = A·B, else d += A·B. m64n128 and m64n64 with
// A from registers: the forward's P V, the backward's dV and dK; m64n64
// and m64n32 from shared memory: the backward's Sᵀ, dPᵀ and dQ.
// d (64 x 128) {=, +=} A (64 x 16, K-major in shared) · B (shared; K-major: 128 x 16 rows,
// kTransB = 1: MN-major, 16 x 128 rows).
template <int kTransB = 0>
__device__ __forceinline__ void wgmma_m64n128k16_ss(float (&d)[64], uint64_t desc_a, uint64_t desc_b,
                                                   int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, %67;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate), "n"(kTransB));
}

// d (64 x 128) {=, +=} A (64 x 16, this thread's fragment a) · B (16 x 128, MN-major in shared).
__device__ __forceinline__ void wgmma_m64n128k16_rs(float (&d)[64], const uint32_t (&a)[4],
                                                   uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));
}

// d (64 x 64) {=, +=} A (64 x 16, this thread's fragment a) · B (16 x 64, MN-major in shared).
__device__ __forceinline__ void wgmma_m64n64k16_rs(float (&d)[32], const uint32_t (&a)[4],
                                                   uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));
}

// d (64 x 64) {=, +=} A (64 x 16, K-major in shared) · B (shared; K-major: 64 x 16 rows,
// kTransB = 1: MN-major, 16 x 64 rows).
template <int kTransB = 0>
__device__ __forceinline__ void wgmma_m64n64k16_ss(float (&d)[32], uint64_t desc_a, uint64_t desc_b,
                                                   int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, %35;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate), "n"(kTransB));
}

// d (64 x 32) {=, +=} A (64 x 16, K-major in shared) · B (shared; K-major: 32 x 16 rows,
// kTransB = 1: MN-major, 16 x 32 rows).
template <int kTransB = 0>
__device__ __forceinline__ void wgmma_m64n32k16_ss(float (&d)[16], uint64_t desc_a, uint64_t desc_b,
                                                   int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, 0, %19;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate), "n"(kTransB));
}

}  // namespace meshloom::kernels::flash
