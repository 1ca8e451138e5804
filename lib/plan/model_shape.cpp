#include "plan/model_shape.hpp"

#include "base/check.hpp"
#include "base/strings.hpp"

namespace meshloom::plan {

namespace {

// Every named model is dense text with an untied head; head_dim is hidden /
// heads (128 for all of them), stated rather than derived.
model::Shape named(const char* name, int64_t layers, int64_t heads, int64_t kv_heads,
                   int64_t hidden, int64_t head_dim, int64_t ffn, int64_t vocab, int64_t experts,
                   int64_t top_k) {
  model::Shape s;
  s.name = name;
  s.vocab = vocab;
  s.d_model = hidden;
  s.n_layers = layers;
  s.n_heads = heads;
  s.n_kv_heads = kv_heads;
  s.head_dim = head_dim;
  s.ffn_dim = ffn;
  s.tied = false;
  s.experts = experts;
  s.top_k = top_k;
  return s;
}

const std::vector<model::Shape>& table() {
  // name, layers, heads, KV heads, hidden, head size, FFN, vocabulary, experts, top-k
  static const std::vector<model::Shape> t = {
      named("llama-7b", 32, 32, 8, 4096, 128, 11008, 32000, 1, 1),
      named("llama-13b", 40, 40, 8, 5120, 128, 13824, 32000, 1, 1),
      named("llama-30b", 60, 52, 8, 6656, 128, 17920, 32000, 1, 1),
      named("llama-70b", 80, 64, 8, 8192, 128, 28672, 32000, 1, 1),
      named("mixtral-8x7b", 32, 32, 8, 4096, 128, 14336, 32000, 8, 2),
      named("mixtral-8x22b", 56, 48, 8, 6144, 128, 16384, 32768, 8, 2),
  };
  return t;
}

}  // namespace

std::vector<std::string> model_shape_names() {
  std::vector<std::string> names;
  for (const model::Shape& s : table()) names.push_back(s.name);
  return names;
}

model::Shape model_shape(const std::string& name) {
  const std::string full = (name.size() <= 4 && !name.empty() && name.back() == 'b')
                               ? "llama-" + name
                               : name;  // "7b" -> "llama-7b"
  for (const model::Shape& s : table())
    if (full == s.name) return s;
  const std::string hint = nearest(name, model_shape_names());
  throw Error(strf("unknown model shape '%s'%s; known: %s", name.c_str(),
                   hint.empty() ? "" : (" (did you mean '" + hint + "'?)").c_str(),
                   join(model_shape_names(), ", ").c_str()));
}

model::Shape shape_from_config(const config::Config& c) {
  model::Shape s = model::Shape::from_config(c.model, config::patch_dim(c));
  s.name = "config";
  double images = 0, all = 0;
  for (const config::SourceConfig& source : c.data.sources) {
    all += source.weight;
    if (source.format == config::SourceFormat::webdataset) images += source.weight;
  }
  s.image_share = all > 0 ? images / all : 0;
  return s;
}

}  // namespace meshloom::plan
