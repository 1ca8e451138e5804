#include "model/params.hpp"

#include <cmath>
#include <numbers>

#include "base/check.hpp"
#include "base/random.hpp"
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
}

Shape Shape::from_config(const config::ModelConfig& c) {
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
  s.init_std = c.init_std;
  s.validate();
  return s;
}

ParamLayout::ParamLayout(const Shape& shape) : shape_(shape) {
  shape_.validate();
  const int64_t d = shape.d_model, f = shape.ffn_dim;
  embed_ = add("embed", {shape.vocab, d}, TensorKind::embed);
  for (int64_t i = 0; i < shape.n_layers; ++i) {
    const std::string p = strf("layers.%lld.", static_cast<long long>(i));
    LayerOffsets o{};
    o.attn_norm = add(p + "attn_norm", {d}, TensorKind::norm);
    o.wq = add(p + "wq", {shape.q_dim(), d}, TensorKind::matrix);
    o.wk = add(p + "wk", {shape.kv_dim(), d}, TensorKind::matrix);
    o.wv = add(p + "wv", {shape.kv_dim(), d}, TensorKind::matrix);
    o.wo = add(p + "wo", {d, shape.q_dim()}, TensorKind::matrix);
    o.mlp_norm = add(p + "mlp_norm", {d}, TensorKind::norm);
    o.w1 = add(p + "w1", {f, d}, TensorKind::matrix);
    o.w3 = add(p + "w3", {f, d}, TensorKind::matrix);
    o.w2 = add(p + "w2", {d, f}, TensorKind::matrix);
    layers_.push_back(o);
  }
  final_norm_ = add("final_norm", {d}, TensorKind::norm);
  head_ = shape.tied ? embed_ : add("lm_head", {shape.vocab, d}, TensorKind::matrix);
}

int64_t ParamLayout::add(const std::string& name, std::vector<int64_t> shape, TensorKind kind) {
  TensorInfo t;
  t.name = name;
  t.numel = 1;
  for (int64_t s : shape) t.numel *= s;
  t.shape = std::move(shape);
  t.offset = numel_;
  t.kind = kind;
  t.index = static_cast<int>(tensors_.size());
  numel_ += t.numel;
  tensors_.push_back(std::move(t));
  return tensors_.back().offset;
}

const TensorInfo& ParamLayout::find(const std::string& name) const {
  for (const TensorInfo& t : tensors_) {
    if (t.name == name) return t;
  }
  ML_FAIL("no parameter tensor named '" + name + "'");
}

std::vector<std::pair<int64_t, int64_t>> ParamLayout::decay_ranges() const {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const TensorInfo& t : tensors_) {
    if (t.kind == TensorKind::norm) continue;
    if (!out.empty() && out.back().second == t.offset) {
      out.back().second = t.offset + t.numel;  // merge adjacent ranges
    } else {
      out.emplace_back(t.offset, t.offset + t.numel);
    }
  }
  return out;
}

double init_std(const Shape& shape, const TensorInfo& t) {
  if (t.kind == TensorKind::norm) return 0.0;
  const std::string& n = t.name;
  const bool residual_out = n.size() >= 3 && (n.ends_with(".wo") || n.ends_with(".w2"));
  if (residual_out) return shape.init_std / std::sqrt(2.0 * static_cast<double>(shape.n_layers));
  return shape.init_std;
}

uint64_t init_hash(uint64_t seed, uint64_t tensor, uint64_t counter) {
  uint64_t h = splitmix64(seed);
  h = mix64(h ^ (tensor + kGoldenGamma));
  return mix64(h ^ (counter + kGoldenGamma));
}

double init_normal(uint64_t seed, uint64_t tensor, uint64_t element) {
  constexpr double kTwoPow53 = 1.0 / 9007199254740992.0;
  const double u1 =
      static_cast<double>((init_hash(seed, tensor, 2 * element) >> 11) + 1) * kTwoPow53;
  const double u2 = static_cast<double>(init_hash(seed, tensor, 2 * element + 1) >> 11) * kTwoPow53;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

template <class T>
void init_params(const ParamLayout& layout, uint64_t seed, std::span<T> params, int threads) {
  ML_CHECK(static_cast<int64_t>(params.size()) == layout.numel(),
           "parameter buffer does not match the layout");
  for (const TensorInfo& t : layout.tensors()) {
    T* dst = params.data() + t.offset;
    if (t.kind == TensorKind::norm) {
      for (int64_t e = 0; e < t.numel; ++e) dst[e] = T(1);
      continue;
    }
    const double std_dev = init_std(layout.shape(), t);
    const auto tensor = static_cast<uint64_t>(t.index);
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1 && t.numel > 65536)
    for (int64_t e = 0; e < t.numel; ++e) {
      dst[e] = static_cast<T>(std_dev * init_normal(seed, tensor, static_cast<uint64_t>(e)));
    }
  }
}

template void init_params<float>(const ParamLayout&, uint64_t, std::span<float>, int);
template void init_params<double>(const ParamLayout&, uint64_t, std::span<double>, int);

}  // namespace meshloom::model
