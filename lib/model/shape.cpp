#include "model/shape.hpp"

#include "base/check.hpp"
#include "base/strings.hpp"

namespace meshloom::model {

void Shape::validate() const {
  ML_CHECK(vocab >= 2 && d_model >= 1 && n_layers >= 1 && ffn_dim >= 1,
           "model dimensions must be positive");
  ML_CHECK(n_heads >= 1 && n_kv_heads >= 1 && n_heads % n_kv_heads == 0,
           strf("n_heads (%lld) must be a multiple of n_kv_heads (%lld)",
                static_cast<long long>(n_heads), static_cast<long long>(n_kv_heads)));
  ML_CHECK(head_dim >= 2 && head_dim % 2 == 0 && n_heads * head_dim == d_model,
           strf("d_model (%lld) must be n_heads (%lld) x an even head size",
                static_cast<long long>(d_model), static_cast<long long>(n_heads)));
  ML_CHECK(rope_theta > 0 && init_std >= 0, "rope_theta must be positive, init_std not negative");
  ML_CHECK(patch_dim >= 0, "patch_dim must not be negative");
}

Shape Shape::from_config(const config::ModelConfig& c, int64_t patch_dim) {
  Shape s;
  s.vocab = c.vocab_size;
  s.d_model = c.d_model;
  s.n_layers = c.n_layers;
  s.n_heads = c.n_heads;
  s.n_kv_heads = c.n_kv_heads;
  s.head_dim = c.n_heads > 0 ? c.d_model / c.n_heads : 0;
  s.ffn_dim = c.ffn_dim;
  s.tied = c.tied_embeddings;
  s.rope_theta = c.rope_theta;
  s.rope_scaling = c.rope_scaling;
  s.norm_eps = c.rms_norm_eps;
  s.init_std = c.init_std;
  s.patch_dim = patch_dim;
  s.validate();
  return s;
}

double Shape::parameters() const {
  const double d = double(d_model);
  const double q_width = double(n_heads) * double(head_dim);
  const double kv_width = double(n_kv_heads) * double(head_dim);
  const double per_layer =
      d * q_width * 2.0 + 2.0 * d * kv_width + 3.0 * d * double(ffn_dim) * experts + 2.0 * d;
  return double(n_layers) * per_layer + 2.0 * d * double(vocab) + d * double(patch_dim);
}

Shape::TpShare Shape::tp_share(int tp) const {
  auto part = [tp](int64_t x) { return (x + tp - 1) / tp; };
  return {part(n_heads), part(n_kv_heads), part(ffn_dim), part(vocab)};
}

int64_t Shape::numel(int tp) const { return stage_numel(tp, n_layers, true, true); }

int64_t Shape::stage_numel(int tp, int64_t stage_layers, bool first, bool last) const {
  const TpShare my = tp_share(tp);
  const int64_t d = d_model, q_width = my.heads * head_dim;
  const int64_t kv_width = my.kv_heads * head_dim, f = my.ffn, rows = my.vocab_rows;
  // attn_norm, wq, wk, wv, wo, mlp_norm, w1, w3, w2.
  const int64_t per_layer = 2 * d + (q_width + 2 * kv_width) * d + d * q_width + 3 * d * f;
  const bool embed = first || (last && tied);
  return (embed ? rows * d : 0) + stage_layers * per_layer +
         (last ? d + (tied ? 0 : rows * d) : 0) + (first ? d * patch_dim : 0);
}

}  // namespace meshloom::model
