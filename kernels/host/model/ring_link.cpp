#include "kernels/host/model/ring_link.hpp"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/device/common/check.cuh"

namespace meshloom::cuda {

namespace {
// K and V rows keep the 16-byte alignment the tensor-core kernels want
// (kv_dim is a multiple of the head size); dK/dV start on a fresh boundary.
constexpr size_t kGradsAlign = 256;
}  // namespace

BlockLayout::BlockLayout(int64_t n_rows, int64_t width, size_t elem_bytes)
    : n(n_rows), kv_dim(width) {
  const size_t rows = size_t(n) * size_t(kv_dim);
  rows_bytes = 2 * rows * elem_bytes + 2 * size_t(n) * sizeof(int32_t);
  grads_offset = (rows_bytes + kGradsAlign - 1) / kGradsAlign * kGradsAlign;
  grads_bytes = 2 * rows * sizeof(float);
}

template <class T>
void copy_block_rows(const FlashKv<T>& kv, int64_t kv_dim, void* dst, cudaMemcpyKind kind,
                     cudaStream_t stream) {
  if (kv.n <= 0) return;
  char* p = static_cast<char*>(dst);
  const size_t row = size_t(kv_dim) * sizeof(T), n = size_t(kv.n);
  // K and V are column slices of the fused QKV buffer: strided rows.
  CUDA_CHECK(cudaMemcpy2DAsync(p, row, kv.k, size_t(kv.ldk) * sizeof(T), row, n, kind, stream));
  CUDA_CHECK(
      cudaMemcpy2DAsync(p + n * row, row, kv.v, size_t(kv.ldv) * sizeof(T), row, n, kind, stream));
  int32_t* ids = reinterpret_cast<int32_t*>(p + 2 * n * row);
  CUDA_CHECK(cudaMemcpyAsync(ids, kv.sample, n * sizeof(int32_t), kind, stream));
  CUDA_CHECK(cudaMemcpyAsync(ids + n, kv.pos, n * sizeof(int32_t), kind, stream));
}

template <class T>
RingBlock<T> block_view(char* base, int64_t n, int64_t kv_dim, bool with_grads) {
  const BlockLayout at(n, kv_dim, sizeof(T));
  const size_t rows = size_t(n) * size_t(kv_dim);
  T* k = reinterpret_cast<T*>(base);
  const int32_t* ids = reinterpret_cast<const int32_t*>(base + 2 * rows * sizeof(T));
  RingBlock<T> b{FlashKv<T>{k, k + rows, kv_dim, kv_dim, ids, ids + n, n}, FlashKvGrad{}};
  if (with_grads) {
    float* g = reinterpret_cast<float*>(base + at.grads_offset);
    b.grad = FlashKvGrad{g, g + rows, kv_dim, kv_dim};
  }
  return b;
}

#define ML_RING_BLOCK(T)                                                              \
  template void copy_block_rows<T>(const FlashKv<T>&, int64_t, void*, cudaMemcpyKind, \
                                   cudaStream_t);                                     \
  template RingBlock<T> block_view<T>(char*, int64_t, int64_t, bool);
ML_RING_BLOCK(float)
ML_RING_BLOCK(__nv_bfloat16)
#undef ML_RING_BLOCK

}  // namespace meshloom::cuda
