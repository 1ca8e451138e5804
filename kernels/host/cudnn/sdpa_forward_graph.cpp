// The forward graph: O and Stats (lse) from Q, K, V over packed documents.
// The operation sequence is the one cuDNN's fused flash-attention engines
// match (the cuDNN documentation's "fused flash attention fprop" pattern).
#include "kernels/host/cudnn/sdpa_graph.hpp"
#include "kernels/host/cudnn/sdpa_graph_ops.hpp"

namespace meshloom::cudnn {

SdpaGraph build_sdpa_forward_graph(const SdpaShape& s) {
  s.validate();
  SdpaGraph g;
  g.shape = s;
  GraphOps ops(g);
  const int64_t B = s.docs, S = s.max_len, H = s.heads, Hkv = s.kv_heads, D = s.head_dim;

  const Descriptor& ragged_q = ops.batch_index(kUidRaggedQ, B + 1);
  const Descriptor& ragged_k = ops.batch_index(kUidRaggedK, B + 1);
  const Descriptor& ragged_v = ops.batch_index(kUidRaggedV, B + 1);
  const Descriptor& ragged_o = ops.batch_index(kUidRaggedO, B + 1);
  const Descriptor& ragged_stats = ops.batch_index(kUidRaggedStats, B + 1);
  const Descriptor& seq_q = ops.batch_index(kUidSeqLenQ, B);
  const Descriptor& seq_kv = ops.batch_index(kUidSeqLenKv, B);

  const Descriptor& q = ops.bound(kUidQ, CUDNN_DATA_BFLOAT16, {B, H, S, D},
                                  token_major_strides(S, s.ld_q, D), &ragged_q);
  // K enters transposed, [B, Hkv, D, S]: the second factor of Q·Kᵀ.
  const Descriptor& kt =
      ops.bound(kUidK, CUDNN_DATA_BFLOAT16, {B, Hkv, D, S}, {S * s.ld_k, D, 1, s.ld_k}, &ragged_k);
  const Descriptor& v = ops.bound(kUidV, CUDNN_DATA_BFLOAT16, {B, Hkv, S, D},
                                  token_major_strides(S, s.ld_v, D), &ragged_v);
  const Descriptor& o = ops.bound(kUidO, CUDNN_DATA_BFLOAT16, {B, H, S, D},
                                  token_major_strides(S, s.ld_o, D), &ragged_o);
  // lse [n, H] token-major: head stride 1, token stride H.
  const Descriptor& stats = ops.bound(kUidStats, CUDNN_DATA_FLOAT, {B, H, S, 1},
                                      token_major_strides(S, H, 1), &ragged_stats);
  const Descriptor& scale = ops.scalar(kUidScale);
  const Descriptor& neg_inf = ops.scalar(kUidNegInf);

  const Dims score_dims{B, H, S, S}, score_strides{H * S * S, S * S, S, 1};
  const Dims row_dims{B, H, S, 1}, row_strides{H * S, S, 1, 1};

  const Descriptor& qk = ops.virtual_tensor(CUDNN_DATA_FLOAT, score_dims, score_strides);
  ops.matmul(q, kt, qk, {&seq_q, &seq_kv, nullptr}, /*zero_padding=*/true);
  const Descriptor& scaled = ops.virtual_tensor(CUDNN_DATA_FLOAT, score_dims, score_strides);
  ops.pointwise(CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, qk, &scale, scaled);
  const Descriptor* masked =
      &ops.padding_mask(scaled, score_dims, score_strides, seq_q, seq_kv, neg_inf);
  if (s.causal) masked = &ops.causal_mask(*masked, score_dims, score_strides, neg_inf);

  // Softmax, keeping Stats = max + log Σ exp for backward and ring merges.
  const Descriptor& max = ops.virtual_tensor(CUDNN_DATA_FLOAT, row_dims, row_strides);
  ops.reduction(CUDNN_REDUCE_TENSOR_MAX, *masked, max);
  const Descriptor& shifted = ops.virtual_tensor(CUDNN_DATA_FLOAT, score_dims, score_strides);
  ops.pointwise(CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, *masked, &max, shifted);
  const Descriptor& exps = ops.virtual_tensor(CUDNN_DATA_FLOAT, score_dims, score_strides);
  ops.pointwise(CUDNN_POINTWISE_EXP, CUDNN_DATA_FLOAT, shifted, nullptr, exps);
  const Descriptor& sum = ops.virtual_tensor(CUDNN_DATA_FLOAT, row_dims, row_strides);
  ops.reduction(CUDNN_REDUCE_TENSOR_ADD, exps, sum);
  const Descriptor& log_sum = ops.virtual_tensor(CUDNN_DATA_FLOAT, row_dims, row_strides);
  ops.pointwise(CUDNN_POINTWISE_LOG, CUDNN_DATA_FLOAT, sum, nullptr, log_sum);
  ops.pointwise(CUDNN_POINTWISE_ADD, CUDNN_DATA_FLOAT, max, &log_sum, stats);
  // P in bf16: the second product's A operand takes the I/O type.
  const Descriptor& p = ops.virtual_tensor(CUDNN_DATA_BFLOAT16, score_dims, score_strides);
  ops.pointwise(CUDNN_POINTWISE_DIV, CUDNN_DATA_FLOAT, exps, &sum, p);

  ops.matmul(p, v, o, {&seq_q, nullptr, &seq_kv});
  return g;
}

}  // namespace meshloom::cudnn
