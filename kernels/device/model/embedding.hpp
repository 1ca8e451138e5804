// The token embedding on the GPU: the forward gather and a deterministic
// backward (no float atomics, so gradients are bit-identical run to run).
//
// Backward adds, for every distinct token id of the micro-batch, the rows of
// dx at that id's positions into its row of d_embed, in position order. The
// grouping (which positions hold which id) is built on the host, where the
// batch's tokens already are (EmbeddingGroups), and uploaded once per
// micro-batch.
//
// Vocabulary-parallel (tensor parallelism): a rank holds the rows `vocab` of
// the embedding; forward writes zero rows for the other tokens (the model
// then sums x over the TP group), and backward adds only into its own rows.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "kernels/device/common/vocab_rows.hpp"

namespace meshloom::cuda {

// Positions grouped by token id, for the tokens in `vocab`: row ids[g]
// (token vocab.first + ids[g]) occurs at order[offsets[g] .. offsets[g+1]),
// positions ascending.
struct EmbeddingGroups {
  std::vector<int32_t> ids, offsets, order;
};
EmbeddingGroups group_tokens(const std::vector<int32_t>& tokens, VocabRows vocab);

// x[t, :] = embed[tokens[t] − vocab.first, :] for t < n where the token is in
// `vocab` (embed holds those rows), else 0; d columns, leading dimensions d.
// T = float or __nv_bfloat16 (x and embed of the same type).
template <class T>
void embedding_forward(const T* embed, VocabRows vocab, const int32_t* tokens, int64_t n, int64_t d,
                       T* x, cudaStream_t stream);

// d_embed[ids[g], :] += Σ_{t in group g} dx[t, :] (fp32 sums, fixed order).
// ids, offsets, order: EmbeddingGroups on the device; groups = ids.size().
template <class T>
void embedding_backward(const T* dx, const int32_t* ids, const int32_t* offsets,
                        const int32_t* order, int64_t groups, int64_t d, float* d_embed,
                        cudaStream_t stream);

}  // namespace meshloom::cuda
