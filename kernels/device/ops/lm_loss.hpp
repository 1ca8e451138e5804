// The row passes of the fused, chunked, vocabulary-parallel LM loss on the
// GPU: the twins of lib/model/lm_loss.cpp's shard_max_and_target,
// shard_exponentials and softmax_minus_onehot_rows. The chunk loop, the head
// products and the reductions over the TP group between the passes are
// kernels/host/model/device_lm_loss.hpp's.
//
// z is one chunk's logits [m, rows] (dense, row-major) for vocabulary rows
// [first, first + rows) of V; targets[i] in [−1, V). Between the passes the
// shards of the vocabulary combine what the pass before produced:
//   1. lm_loss_shard_max    max[i] = the shard's largest logit; target_logit[i]
//                           = z[i, target − first] where this shard holds the
//                           target, else 0             → max over the group
//   2. lm_loss_shard_sums   sum[i] = Σ exp(z − max[i]) over the shard (0 for a
//                           token without a target)   → sum (and target_logit)
//                           over the group
//   3. lm_loss_softmax_grad z = softmax − onehot (rows without a target: 0),
//                           row_loss[i] = log sum[i] − (target_logit[i] − max[i])
// Statistics are double, as on the CPU; the math on z is fp32. One block
// per token; the block reductions have a fixed order, so results are the same
// run to run. T = float or __nv_bfloat16. Device pointers; asynchronous on
// `stream`.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/device/common/vocab_rows.hpp"

namespace meshloom::cuda {

template <class T>
void lm_loss_shard_max(const T* z, int64_t m, VocabRows shard, const int32_t* targets, double* max,
                       double* target_logit, cudaStream_t stream);

template <class T>
void lm_loss_shard_sums(const T* z, int64_t m, int64_t rows, const int32_t* targets,
                        const double* max, double* sum, cudaStream_t stream);

template <class T>
void lm_loss_softmax_grad(T* z, int64_t m, VocabRows shard, const int32_t* targets,
                          const double* max, const double* sum, const double* target_logit,
                          double* row_loss, cudaStream_t stream);

// *loss_sum = Σ row_loss[0, n) and *count = #(targets ≥ 0), in a fixed order
// (one block).
void lm_loss_total(const double* row_loss, const int32_t* targets, int64_t n, double* loss_sum,
                   int64_t* count, cudaStream_t stream);

// dst[i] = scale·src[i] for i < n (dst may be src).
template <class T>
void scale_into(const T* src, int64_t n, float scale, T* dst, cudaStream_t stream);

// dst[i] += scale·src[i] for i < n (fp32).
void add_scaled(const float* src, int64_t n, float scale, float* dst, cudaStream_t stream);

}  // namespace meshloom::cuda
