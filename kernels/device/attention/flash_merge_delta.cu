// The two row-wise attention helpers: the online-softmax merge of a partial
// (out, lse) into an accumulator (ring attention forward), and
// delta = rowsum(dO ⊙ O) per head (backward). One warp per (row, head).
#include <cmath>

#include "kernels/device/attention/flash_attention.hpp"
#include "kernels/device/attention/flash_tiles.cuh"
#include "kernels/device/common/check.cuh"

namespace meshloom::cuda {
namespace {

using flash::from_float;
using flash::to_float;

constexpr int kBlock = 256;  // 8 warps, one (row, head) each

unsigned warp_blocks(int64_t warps) {
  return static_cast<unsigned>((warps * 32 + kBlock - 1) / kBlock);
}

template <class TO>
__global__ void merge_kernel(int64_t n, int H, int D, TO* acc, int64_t ld_acc, float* acc_lse,
                             const TO* part, int64_t ld_part, const float* part_lse) {
  const int64_t w = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (w >= n * H) return;  // whole warps leave together
  const int64_t i = w / H;
  const int h = static_cast<int>(w % H);
  const float lb = part_lse[w];
  const float la = acc_lse[w];
  if (lb == -INFINITY) return;  // the part saw no key: acc stays
  TO* oa = acc + i * ld_acc + h * D;
  const TO* ob = part + i * ld_part + h * D;
  float new_lse = lb;
  if (la == -INFINITY) {
    for (int c = lane; c < D; c += 32) oa[c] = ob[c];
  } else {
    const float mx = fmaxf(la, lb);
    const float wa = expf(la - mx), wb = expf(lb - mx);
    const float sum = wa + wb;
    const float ca = wa / sum, cb = wb / sum;
    for (int c = lane; c < D; c += 32) {
      oa[c] = from_float<TO>(ca * to_float(oa[c]) + cb * to_float(ob[c]));
    }
    new_lse = mx + logf(sum);
  }
  __syncwarp();  // every lane has read acc_lse before it changes
  if (lane == 0) acc_lse[w] = new_lse;
}

template <class TO, class T>
__global__ void delta_kernel(int64_t n, int H, int D, const TO* out, int64_t ldo, const T* dout,
                             int64_t lddo, float* delta) {
  const int64_t w = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (w >= n * H) return;
  const int64_t i = w / H;
  const int h = static_cast<int>(w % H);
  const TO* o = out + i * ldo + h * D;
  const T* d = dout + i * lddo + h * D;
  float sum = 0.0f;
  for (int c = lane; c < D; c += 32) sum = fmaf(to_float(o[c]), to_float(d[c]), sum);
  sum = flash::warp_sum(sum);
  if (lane == 0) delta[w] = sum;
}

}  // namespace

template <class TO>
void flash_attention_merge(const FlashDims& dims, int64_t n, const FlashOut<TO>& acc, const TO* out,
                           int64_t ld, const float* lse, cudaStream_t stream) {
  flash::check_dims(dims.n_heads, dims.n_kv_heads, dims.head_dim);
  if (n == 0) return;
  const int64_t warps = n * dims.n_heads;
  merge_kernel<TO><<<warp_blocks(warps), kBlock, 0, stream>>>(
      n, dims.n_heads, dims.head_dim, acc.out, acc.ld, acc.lse, out, ld, lse);
  CUDA_CHECK(cudaGetLastError());
}

template <class TO, class T>
void flash_attention_delta(const FlashDims& dims, int64_t n, const TO* out, int64_t ldo,
                           const T* dout, int64_t lddo, float* delta, cudaStream_t stream) {
  flash::check_dims(dims.n_heads, dims.n_kv_heads, dims.head_dim);
  if (n == 0) return;
  const int64_t warps = n * dims.n_heads;
  delta_kernel<TO, T><<<warp_blocks(warps), kBlock, 0, stream>>>(n, dims.n_heads, dims.head_dim,
                                                                 out, ldo, dout, lddo, delta);
  CUDA_CHECK(cudaGetLastError());
}

template void flash_attention_merge<__nv_bfloat16>(const FlashDims&, int64_t,
                                                   const FlashOut<__nv_bfloat16>&,
                                                   const __nv_bfloat16*, int64_t, const float*,
                                                   cudaStream_t);
template void flash_attention_merge<float>(const FlashDims&, int64_t, const FlashOut<float>&,
                                           const float*, int64_t, const float*, cudaStream_t);
template void flash_attention_delta<__nv_bfloat16, __nv_bfloat16>(const FlashDims&, int64_t,
                                                                  const __nv_bfloat16*, int64_t,
                                                                  const __nv_bfloat16*, int64_t,
                                                                  float*, cudaStream_t);
template void flash_attention_delta<float, __nv_bfloat16>(const FlashDims&, int64_t, const float*,
                                                          int64_t, const __nv_bfloat16*, int64_t,
                                                          float*, cudaStream_t);
template void flash_attention_delta<float, float>(const FlashDims&, int64_t, const float*, int64_t,
                                                  const float*, int64_t, float*, cudaStream_t);

}  // namespace meshloom::cuda
