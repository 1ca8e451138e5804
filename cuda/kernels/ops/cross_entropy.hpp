// Fused softmax cross-entropy over the vocabulary on the GPU, the twin of the
// CPU's cross_entropy_row (lib/model/transformer.cpp). For each row z of
// logits [n, V] with a target (targets[i] ≥ 0):
//   row_loss[i] = logsumexp(z) − z[target]              (double)
//   dlogits[i]  = (softmax(z) − onehot(target)) · scale
// and for rows with target −1: row_loss 0 and dlogits all 0. Then
//   *loss_sum = Σ row_loss (double, fixed order), *count = #(targets ≥ 0).
// One block per row: one read of the row for an online max and sum, one read
// to write the gradient, so no [n, V] softmax is ever stored.
//
// Scaling: the CPU writes softmax − onehot (scale 1) and passes
// 1 / (global prediction count) as alpha to the two LM-head GEMMs of backward
// (Transformer::backward(scale), trainer: scale = 1/batch.global_predictions).
// scale = 1 gives the CPU's buffer; scale = 1/global count folds that alpha
// in here (then use alpha = 1 in the GEMMs). Not both.
//
// logits and dlogits are row-major with leading dimensions ld and ld_out;
// dlogits may be logits itself (in place, same ld); targets in [−1, V).
// row_loss [n], loss_sum and count (one element each) are device memory,
// overwritten. T = float or __nv_bfloat16 (fp32 math). Asynchronous on
// `stream`.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace meshloom::kernels {

template <class T>
void cross_entropy(const T* logits, int64_t ld, const int32_t* targets, int64_t n, int64_t V,
                   float scale, T* dlogits, int64_t ld_out, double* row_loss, double* loss_sum,
                   int64_t* count, cudaStream_t stream);

}  // namespace meshloom::kernels
