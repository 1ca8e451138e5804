#include "plan/model_shape.hpp"

#include "base/check.hpp"
#include "base/strings.hpp"

namespace meshloom::plan {

double ModelShape::linear_flops_per_token() const {
  const double d = double(hidden);
  const double q_dim = double(heads) * double(head_dim());
  const double kv_dim = double(kv_heads) * double(head_dim());
  // wq, wk, wv, wo, then SwiGLU w1, w3, w2 for each active expert.
  const double per_layer = d * q_dim + 2.0 * d * kv_dim + q_dim * d + 3.0 * d * double(ffn) * top_k;
  return 2.0 *
         (double(layers) * per_layer + d * double(vocab) + d * double(patch_dim) * image_share);
}

double ModelShape::attention_flops_per_token2() const {
  // q.k and p.v are 2 FLOPs per multiply-add over heads x head_dim, for the
  // L^2 / 2 (query, key) pairs of the causal triangle: 2 * 2 * (1/2) = 2.
  return 2.0 * double(layers) * double(heads) * double(head_dim());
}

double ModelShape::kv_bytes_per_token_layer() const {
  return 2.0 * double(kv_heads) * double(head_dim()) * 2.0;
}

double ModelShape::act_bytes_per_token_layer() const { return 34.0 * double(hidden); }

double ModelShape::parameters() const {
  const double d = double(hidden);
  const double q_dim = double(heads) * double(head_dim());
  const double kv_dim = double(kv_heads) * double(head_dim());
  const double per_layer =
      d * q_dim * 2.0 + 2.0 * d * kv_dim + 3.0 * d * double(ffn) * experts + 2.0 * d;
  return double(layers) * per_layer + 2.0 * d * double(vocab) + d * double(patch_dim);
}

ModelShape::TpShare ModelShape::tp_share(int tp) const {
  auto part = [tp](int64_t x) { return (x + tp - 1) / tp; };
  return {part(heads), part(kv_heads), part(ffn), part(vocab)};
}

int64_t ModelShape::numel(int tp) const { return stage_numel(tp, layers, true, true); }

int64_t ModelShape::stage_numel(int tp, int64_t stage_layers, bool first, bool last) const {
  const TpShare my = tp_share(tp);
  const int64_t d = hidden, q_dim = my.heads * head_dim();
  const int64_t kv_dim = my.kv_heads * head_dim(), f = my.ffn, rows = my.vocab_rows;
  // attn_norm, wq, wk, wv, wo, mlp_norm, w1, w3, w2.
  const int64_t per_layer = 2 * d + (q_dim + 2 * kv_dim) * d + d * q_dim + 3 * d * f;
  const bool embed = first || (last && tied);
  return (embed ? rows * d : 0) + stage_layers * per_layer +
         (last ? d + (tied ? 0 : rows * d) : 0) + (first ? d * patch_dim : 0);
}

namespace {

struct Named {
  const char* name;
  ModelShape shape;
};

const std::vector<Named>& table() {
  static const std::vector<Named> t = {
      {"llama-7b", {"llama-7b", 32, 32, 8, 4096, 11008, 32000, 1, 1}},
      {"llama-13b", {"llama-13b", 40, 40, 8, 5120, 13824, 32000, 1, 1}},
      {"llama-30b", {"llama-30b", 60, 52, 8, 6656, 17920, 32000, 1, 1}},
      {"llama-70b", {"llama-70b", 80, 64, 8, 8192, 28672, 32000, 1, 1}},
      {"mixtral-8x7b", {"mixtral-8x7b", 32, 32, 8, 4096, 14336, 32000, 8, 2}},
      {"mixtral-8x22b", {"mixtral-8x22b", 56, 48, 8, 6144, 16384, 32768, 8, 2}},
  };
  return t;
}

}  // namespace

std::vector<std::string> model_shape_names() {
  std::vector<std::string> names;
  for (const Named& n : table()) names.push_back(n.name);
  return names;
}

ModelShape model_shape(const std::string& name) {
  const std::string full = (name.size() <= 4 && !name.empty() && name.back() == 'b')
                               ? "llama-" + name
                               : name;  // "7b" -> "llama-7b"
  for (const Named& n : table())
    if (full == n.name) return n.shape;
  const std::string hint = nearest(name, model_shape_names());
  throw Error(strf("unknown model shape '%s'%s; known: %s", name.c_str(),
                   hint.empty() ? "" : (" (did you mean '" + hint + "'?)").c_str(),
                   join(model_shape_names(), ", ").c_str()));
}

ModelShape shape_from_config(const config::Config& c) {
  const config::ModelConfig& model = c.model;
  ModelShape s;
  s.name = "config";
  s.layers = int(model.n_layers);
  s.heads = int(model.n_heads);
  s.kv_heads = int(model.n_kv_heads);
  s.hidden = model.d_model;
  s.ffn = model.ffn_dim;
  s.vocab = model.vocab_size;
  s.tied = model.tied_embeddings;
  s.patch_dim = config::patch_dim(c);
  double images = 0, all = 0;
  for (const config::SourceConfig& source : c.data.sources) {
    all += source.weight;
    if (source.format == config::SourceFormat::webdataset) images += source.weight;
  }
  s.image_share = all > 0 ? images / all : 0;
  return s;
}

}  // namespace meshloom::plan
