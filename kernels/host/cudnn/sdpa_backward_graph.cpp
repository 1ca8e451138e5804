// The backward graph: dQ, dK, dV (bf16) from Q, K, V, O, dO and Stats, the
// sequence of cuDNN's fused flash-attention backward pattern on its fp32
// dQ-accumulator path (no [S, S] dP workspace):
//   softmax_sum = rowsum(dO ∘ O)
//   P  = exp(Q·Kᵀ·scale − Stats), masked        dV = Pᵀ·dO
//   dS = P ∘ (dO·Vᵀ − softmax_sum) · scale      dK = dSᵀ·Q, dQ = dS·K
// With GQA, dK and dV are first made per query head (full-head scratch) and
// summed over each KV head's group.
#include "kernels/host/cudnn/sdpa_graph.hpp"
#include "kernels/host/cudnn/sdpa_graph_ops.hpp"

namespace meshloom::cudnn {

namespace {
int64_t align256(int64_t bytes) { return (bytes + 255) / 256 * 256; }
}  // namespace

BackwardScratch backward_scratch(const SdpaShape& s, int64_t tokens) {
  BackwardScratch w;
  int64_t at = 0;
  auto take = [&](int64_t bytes) {
    const int64_t here = at;
    at += align256(bytes);
    return here;
  };
  w.softmax_sum = take(tokens * s.heads * int64_t(sizeof(float)));
  w.dq_accum = take(tokens * s.heads * s.head_dim * int64_t(sizeof(float)));
  if (s.heads != s.kv_heads) {
    // bf16 tensors, sized as fp32 as cuDNN's own frontend sizes them.
    w.dk_full = take(tokens * s.heads * s.head_dim * int64_t(sizeof(float)));
    w.dv_full = take(tokens * s.heads * s.head_dim * int64_t(sizeof(float)));
  }
  w.bytes = at;
  return w;
}

SdpaGraph build_sdpa_backward_graph(const SdpaShape& s) {
  s.validate();
  SdpaGraph g;
  g.shape = s;
  g.backward = true;
  GraphOps ops(g);
  const int64_t B = s.docs, S = s.max_len, H = s.heads, Hkv = s.kv_heads, D = s.head_dim;
  const bool gqa = H != Hkv;

  const Descriptor& ragged_q = ops.batch_index(kUidRaggedQ, B + 1);
  const Descriptor& ragged_k = ops.batch_index(kUidRaggedK, B + 1);
  const Descriptor& ragged_v = ops.batch_index(kUidRaggedV, B + 1);
  const Descriptor& ragged_o = ops.batch_index(kUidRaggedO, B + 1);
  const Descriptor& ragged_do = ops.batch_index(kUidRaggedDO, B + 1);
  const Descriptor& ragged_stats = ops.batch_index(kUidRaggedStats, B + 1);
  const Descriptor& ragged_dq = ops.batch_index(kUidRaggedDQ, B + 1);
  const Descriptor& ragged_dkv = ops.batch_index(kUidRaggedDKV, B + 1);
  const Descriptor& seq_q = ops.batch_index(kUidSeqLenQ, B);
  const Descriptor& seq_kv = ops.batch_index(kUidSeqLenKv, B);

  const auto bf16 = CUDNN_DATA_BFLOAT16;
  const Dims qd{B, H, S, D}, kvd{B, Hkv, S, D};
  const Dims dq_strides = token_major_strides(S, H * D, D);
  const Dims dkv_strides = token_major_strides(S, Hkv * D, D);
  const Dims stats_strides = token_major_strides(S, H, 1);
  const Descriptor& q = ops.bound(kUidQ, bf16, qd, token_major_strides(S, s.ld_q, D), &ragged_q);
  const Descriptor& kt =
      ops.bound(kUidK, bf16, {B, Hkv, D, S}, {S * s.ld_k, D, 1, s.ld_k}, &ragged_k);
  const Descriptor& vt =
      ops.bound(kUidV, bf16, {B, Hkv, D, S}, {S * s.ld_v, D, 1, s.ld_v}, &ragged_v);
  const Descriptor& o = ops.bound(kUidO, bf16, qd, token_major_strides(S, s.ld_o, D), &ragged_o);
  const Descriptor& d_o =
      ops.bound(kUidDO, bf16, qd, token_major_strides(S, s.ld_do, D), &ragged_do);
  const Descriptor& stats =
      ops.bound(kUidStats, CUDNN_DATA_FLOAT, {B, H, S, 1}, stats_strides, &ragged_stats);
  const Descriptor& dq = ops.bound(kUidDQ, bf16, qd, dq_strides, &ragged_dq);
  const Descriptor& dk = ops.bound(kUidDK, bf16, kvd, dkv_strides, &ragged_dkv);
  const Descriptor& dv = ops.bound(kUidDV, bf16, kvd, dkv_strides, &ragged_dkv);
  const Descriptor& scale = ops.scalar(kUidScale);
  const Descriptor& neg_inf = ops.scalar(kUidNegInf);
  const Descriptor& one = ops.scalar(kUidOne);

  const Dims score_dims{B, H, S, S}, score_strides{H * S * S, S * S, S, 1};
  const Dims scoreT_dims{B, H, S, S}, scoreT_strides{H * S * S, S * S, 1, S};
  const Dims row_dims{B, H, S, 1}, row_strides{H * S, S, 1, 1};

  // softmax_sum = Σ_d dO ∘ O, in the workspace (ragged like Stats).
  const Descriptor& do_o = ops.virtual_tensor(CUDNN_DATA_FLOAT, qd, {H * S * D, S * D, H * D, 1});
  ops.pointwise(CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, d_o, &o, do_o);
  const Descriptor& row_sum = ops.virtual_tensor(CUDNN_DATA_FLOAT, row_dims, row_strides);
  ops.reduction(CUDNN_REDUCE_TENSOR_ADD, do_o, row_sum);
  const Descriptor& softmax_sum =
      ops.bound(kUidSoftmaxSum, CUDNN_DATA_FLOAT, {B, H, S, 1}, stats_strides, &ragged_stats);
  ops.pointwise(CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, row_sum, &one, softmax_sum);

  // P = exp(S·scale − Stats), masked as in forward.
  const Descriptor& qk = ops.virtual_tensor(CUDNN_DATA_FLOAT, score_dims, score_strides);
  ops.matmul(q, kt, qk, {&seq_q, &seq_kv, nullptr});
  const Descriptor& scaled = ops.virtual_tensor(CUDNN_DATA_FLOAT, score_dims, score_strides);
  ops.pointwise(CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, qk, &scale, scaled);
  const Descriptor& shifted = ops.virtual_tensor(CUDNN_DATA_FLOAT, score_dims, score_strides);
  ops.pointwise(CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, scaled, &stats, shifted);
  const Descriptor* masked =
      &ops.padding_mask(shifted, score_dims, score_strides, seq_q, seq_kv, neg_inf);
  if (s.causal) masked = &ops.causal_mask(*masked, score_dims, score_strides, neg_inf);
  const Descriptor& p = ops.virtual_tensor(CUDNN_DATA_FLOAT, score_dims, score_strides);
  ops.pointwise(CUDNN_POINTWISE_EXP, CUDNN_DATA_FLOAT, *masked, nullptr, p);

  // A [B, H, S, D] product with rows over keys, summed over each KV head's
  // query heads for GQA through a full-head scratch tensor.
  auto key_rows_product = [&](const Descriptor& a_t, const Descriptor& b, const Descriptor& out,
                              int64_t full_uid, const Descriptor& ragged_out) {
    if (!gqa) {
      ops.matmul(a_t, b, out, {&seq_kv, nullptr, &seq_q});
      return;
    }
    // The full-head tensor shares dK/dV's ragged offsets; cuDNN scales them
    // by H / Hkv (its "implicit multiplier").
    const int64_t group = H / Hkv;
    Dims full_strides = dkv_strides;
    full_strides[0] *= group;
    full_strides[2] *= group;
    const Descriptor& full = ops.bound(full_uid, bf16, qd, full_strides, &ragged_out);
    ops.matmul(a_t, b, full, {&seq_kv, nullptr, &seq_q});
    ops.reduction(CUDNN_REDUCE_TENSOR_ADD, full, out);
  };

  // dV = Pᵀ·dO.
  const Descriptor& p_t = ops.virtual_tensor(bf16, scoreT_dims, scoreT_strides);
  ops.reshape(p, p_t);
  key_rows_product(p_t, d_o, dv, kUidDVFull, ragged_dkv);

  // dS = P ∘ (dO·Vᵀ − softmax_sum) · scale.
  const Descriptor& dp = ops.virtual_tensor(CUDNN_DATA_FLOAT, score_dims, score_strides);
  ops.matmul(d_o, vt, dp, {&seq_q, &seq_kv, nullptr});
  const Descriptor& dp_centred = ops.virtual_tensor(CUDNN_DATA_FLOAT, score_dims, score_strides);
  ops.pointwise(CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, dp, &softmax_sum, dp_centred);
  const Descriptor& ds_unscaled = ops.virtual_tensor(CUDNN_DATA_FLOAT, score_dims, score_strides);
  ops.pointwise(CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, dp_centred, &p, ds_unscaled);
  const Descriptor& ds = ops.virtual_tensor(CUDNN_DATA_FLOAT, score_dims, score_strides);
  ops.pointwise(CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, ds_unscaled, &scale, ds);

  // dK = dSᵀ·Q.
  const Descriptor& ds_t = ops.virtual_tensor(bf16, scoreT_dims, scoreT_strides);
  ops.reshape(ds, ds_t);
  key_rows_product(ds_t, q, dk, kUidDKFull, ragged_dkv);

  // dQ = dS·K, accumulated in fp32 (workspace), then rounded to bf16.
  const Descriptor& k = ops.virtual_tensor(bf16, kvd, token_major_strides(S, s.ld_k, D), &ragged_k);
  ops.reshape(kt, k);
  const Descriptor& dq_accum = ops.bound(kUidDQAccum, CUDNN_DATA_FLOAT, qd, dq_strides, &ragged_dq);
  ops.matmul(ds, k, dq_accum, {&seq_q, nullptr, &seq_kv});
  ops.pointwise(CUDNN_POINTWISE_IDENTITY, CUDNN_DATA_FLOAT, dq_accum, nullptr, dq);
  return g;
}

}  // namespace meshloom::cudnn
