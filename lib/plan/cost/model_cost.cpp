#include "plan/cost/model_cost.hpp"

namespace meshloom::plan {

double linear_flops_per_token(const model::Shape& s) {
  const double d = double(s.d_model);
  const double q_width = double(s.n_heads) * double(s.head_dim);
  const double kv_width = double(s.n_kv_heads) * double(s.head_dim);
  // wq, wk, wv, wo, then SwiGLU w1, w3, w2 for each active expert.
  const double per_layer =
      d * q_width + 2.0 * d * kv_width + q_width * d + 3.0 * d * double(s.ffn_dim) * s.top_k;
  return 2.0 * (double(s.n_layers) * per_layer + d * double(s.vocab) +
                d * double(s.patch_dim) * s.image_share);
}

double attention_flops_per_token2(const model::Shape& s) {
  // q.k and p.v are 2 FLOPs per multiply-add over heads x head_dim, for the
  // L^2 / 2 (query, key) pairs of the causal triangle: 2 * 2 * (1/2) = 2.
  return 2.0 * double(s.n_layers) * double(s.n_heads) * double(s.head_dim);
}

double kv_bytes_per_token_layer(const model::Shape& s) {
  return 2.0 * double(s.n_kv_heads) * double(s.head_dim) * 2.0;
}

double act_bytes_per_token_layer(const model::Shape& s) { return 34.0 * double(s.d_model); }

}  // namespace meshloom::plan
