#include <cuda_bf16.h>

#include <algorithm>

#include "kernels/device/common/check.cuh"
#include "kernels/device/common/elem.cuh"
#include "kernels/device/model/embedding.hpp"

namespace meshloom::cuda {

namespace {

// One block per token row, threads over the columns.
template <class T>
__global__ void gather_rows(const T* embed, VocabRows vocab, const int32_t* tokens, int64_t d,
                            T* x) {
  const int64_t t = blockIdx.x;
  const int64_t r = int64_t(tokens[t]) - vocab.first;
  T* dst = x + t * d;
  if (r < 0 || r >= vocab.rows) {  // another rank's row: it adds it in the sum
    for (int64_t c = threadIdx.x; c < d; c += blockDim.x) dst[c] = from_f32<T>(0.0f);
    return;
  }
  const T* src = embed + r * d;
  for (int64_t c = threadIdx.x; c < d; c += blockDim.x) dst[c] = src[c];
}

// One block per distinct id, threads over the columns; each thread sums its
// column over the id's positions in order, so the result is deterministic.
template <class T>
__global__ void scatter_groups(const T* dx, const int32_t* ids, const int32_t* offsets,
                               const int32_t* order, int64_t d, float* d_embed) {
  const int64_t g = blockIdx.x;
  const int32_t begin = offsets[g], end = offsets[g + 1];
  float* row = d_embed + int64_t(ids[g]) * d;
  for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
    float sum = 0;
    for (int32_t j = begin; j < end; ++j) sum += to_f32(dx[int64_t(order[j]) * d + c]);
    row[c] += sum;
  }
}

int threads_for(int64_t d) { return int(std::min<int64_t>(256, (d + 31) / 32 * 32)); }

}  // namespace

EmbeddingGroups group_tokens(const std::vector<int32_t>& tokens, VocabRows vocab) {
  EmbeddingGroups g;
  for (size_t t = 0; t < tokens.size(); ++t) {
    const int64_t r = int64_t(tokens[t]) - vocab.first;
    if (r >= 0 && r < vocab.rows) g.order.push_back(int32_t(t));
  }
  std::stable_sort(g.order.begin(), g.order.end(),
                   [&](int32_t a, int32_t b) { return tokens[size_t(a)] < tokens[size_t(b)]; });
  for (size_t j = 0; j < g.order.size(); ++j) {
    const int32_t id = int32_t(tokens[size_t(g.order[j])] - vocab.first);
    if (g.ids.empty() || g.ids.back() != id) {
      g.ids.push_back(id);
      g.offsets.push_back(int32_t(j));
    }
  }
  g.offsets.push_back(int32_t(g.order.size()));
  return g;
}

template <class T>
void embedding_forward(const T* embed, VocabRows vocab, const int32_t* tokens, int64_t n, int64_t d,
                       T* x, cudaStream_t stream) {
  if (n == 0) return;
  gather_rows<T><<<unsigned(n), threads_for(d), 0, stream>>>(embed, vocab, tokens, d, x);
  CUDA_CHECK(cudaGetLastError());
}

template <class T>
void embedding_backward(const T* dx, const int32_t* ids, const int32_t* offsets,
                        const int32_t* order, int64_t groups, int64_t d, float* d_embed,
                        cudaStream_t stream) {
  if (groups == 0) return;
  scatter_groups<T>
      <<<unsigned(groups), threads_for(d), 0, stream>>>(dx, ids, offsets, order, d, d_embed);
  CUDA_CHECK(cudaGetLastError());
}

#define ML_EMBEDDING(T)                                                                         \
  template void embedding_forward<T>(const T*, VocabRows, const int32_t*, int64_t, int64_t, T*, \
                                     cudaStream_t);                                             \
  template void embedding_backward<T>(const T*, const int32_t*, const int32_t*, const int32_t*, \
                                      int64_t, int64_t, float*, cudaStream_t);
ML_EMBEDDING(float)
ML_EMBEDDING(__nv_bfloat16)
#undef ML_EMBEDDING

}  // namespace meshloom::cuda
