#include "model/params.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "base/check.hpp"
#include "base/math.hpp"
#include "base/random.hpp"
#include "base/strings.hpp"

namespace meshloom::model {

int64_t TpShard::vocab_begin(int64_t vocab) const {
  return std::min(vocab, rank * ceil_div(vocab, size));
}
int64_t TpShard::vocab_rows(int64_t vocab) const {
  return std::min(vocab, (rank + 1) * ceil_div(vocab, size)) - vocab_begin(vocab);
}

ParamLayout::ParamLayout(const Shape& shape, TpShard shard, StageLayers stage)
    : shape_(shape), shard_(shard), stage_(stage) {
  shape_.validate();
  if (stage_.end < 0) stage_.end = shape.n_layers;
  ML_CHECK(stage_.first >= 0 && stage_.first < stage_.end && stage_.end <= shape.n_layers,
           strf("a pipeline stage holds layers [%lld, %lld) of %lld", (long long)stage_.first,
                (long long)stage_.end, (long long)shape.n_layers));
  ML_CHECK(shard.size >= 1 && shard.rank >= 0 && shard.rank < shard.size,
           strf("TP rank %lld of %lld", static_cast<long long>(shard.rank),
                static_cast<long long>(shard.size)));
  ML_CHECK(shape.n_heads % shard.size == 0 && shape.n_kv_heads % shard.size == 0 &&
               shape.ffn_dim % shard.size == 0,
           strf("tp %lld must divide n_heads, n_kv_heads and ffn_dim",
                static_cast<long long>(shard.size)));
  const int64_t d = shape.d_model, f = shape.ffn_dim, D = shape.head_dim;
  const int64_t V = shape.vocab, v0 = shard.vocab_begin(V), vn = shard.vocab_rows(V);
  // This rank's rows of wq (its heads), of wk and wv (its KV heads), of w1 and
  // w3 (its FFN columns); wo and w2 take the same blocks as columns.
  const int64_t q0 = shard.rank * shard.part(shape.q_dim()), qn = shard.part(shape.q_dim());
  const int64_t k0 = shard.rank * shard.part(shape.kv_dim()), kn = shard.part(shape.kv_dim());
  const int64_t f0 = shard.rank * shard.part(f), fn = shard.part(f);
  ML_CHECK(shard.part(shape.n_heads) * D == qn, "heads split evenly");
  // With tied embeddings the last stage's head is the embedding.
  const bool first = first_stage(), last = last_stage();
  embed_ = add(first || (last && shape.tied), "embed", {V, d}, TensorKind::embed, 0, v0, vn);
  for (int64_t i = 0; i < shape.n_layers; ++i) {
    const bool held = holds_layer(i);
    const std::string p = strf("layers.%lld.", static_cast<long long>(i));
    LayerOffsets o{};
    o.attn_norm = add(held, p + "attn_norm", {d}, TensorKind::norm);
    o.wq = add(held, p + "wq", {shape.q_dim(), d}, TensorKind::matrix, 0, q0, qn);
    o.wk = add(held, p + "wk", {shape.kv_dim(), d}, TensorKind::matrix, 0, k0, kn);
    o.wv = add(held, p + "wv", {shape.kv_dim(), d}, TensorKind::matrix, 0, k0, kn);
    o.wo = add(held, p + "wo", {d, shape.q_dim()}, TensorKind::matrix, 1, q0, qn);
    o.mlp_norm = add(held, p + "mlp_norm", {d}, TensorKind::norm);
    o.w1 = add(held, p + "w1", {f, d}, TensorKind::matrix, 0, f0, fn);
    o.w3 = add(held, p + "w3", {f, d}, TensorKind::matrix, 0, f0, fn);
    o.w2 = add(held, p + "w2", {d, f}, TensorKind::matrix, 1, f0, fn);
    if (held) layers_.push_back(o);
  }
  final_norm_ = add(last, "final_norm", {d}, TensorKind::norm);
  head_ = shape.tied ? embed_ : add(last, "lm_head", {V, d}, TensorKind::matrix, 0, v0, vn);
  if (!last) head_ = -1;
  if (shape.patch_dim > 0)  // replicated over a TP group, like the norm gains
    patch_embed_ = add(first, "patch_embed", {d, shape.patch_dim}, TensorKind::matrix);
}

// `full_shape` cut along `split_dim` (-1: whole) to [begin, begin + count).
int64_t ParamLayout::add(bool held, const std::string& name, std::vector<int64_t> full_shape,
                         TensorKind kind, int split_dim, int64_t begin, int64_t count) {
  const int index = next_index_++;
  if (!held) return -1;
  TensorInfo t;
  t.name = name;
  t.shape = full_shape;
  if (split_dim >= 0 && shard_.size > 1) {
    t.shape[size_t(split_dim)] = count;
    t.split_dim = split_dim;
    t.split_begin = begin;
  }
  t.full_shape = std::move(full_shape);
  t.numel = 1;
  for (int64_t s : t.shape) t.numel *= s;
  t.offset = numel_;
  t.kind = kind;
  t.index = index;
  numel_ += t.numel;
  tensors_.push_back(std::move(t));
  return tensors_.back().offset;
}

int64_t TensorInfo::full_element(int64_t e) const {
  if (split_dim < 0) return e;
  const int64_t cols = shape.back(), full_cols = full_shape.back();
  const int64_t row = e / cols, col = e % cols;
  return split_dim == 0 ? (split_begin + row) * full_cols + col
                        : row * full_cols + split_begin + col;
}

// A shard is a block of whole rows (split 0) or, in every row, a run of
// columns (split 1): copied row by row.
template <class T>
static void copy_shard(const TensorInfo& t, T* full, T* shard, bool to_shard) {
  const int64_t cols = t.shape.empty() ? 1 : t.shape.back();
  const int64_t rows = cols > 0 ? t.numel / cols : 0;
  for (int64_t r = 0; r < rows; ++r) {
    T* f = full + t.full_element(r * cols);
    T* s = shard + r * cols;
    if (to_shard)
      std::copy(f, f + cols, s);
    else
      std::copy(s, s + cols, f);
  }
}

template <class T>
void take_shard(const TensorInfo& t, const T* full, T* shard) {
  copy_shard(t, const_cast<T*>(full), shard, true);
}
template <class T>
void put_shard(const TensorInfo& t, const T* shard, T* full) {
  copy_shard(t, full, const_cast<T*>(shard), false);
}
template void take_shard<float>(const TensorInfo&, const float*, float*);
template void take_shard<double>(const TensorInfo&, const double*, double*);
template void put_shard<float>(const TensorInfo&, const float*, float*);
template void put_shard<double>(const TensorInfo&, const double*, double*);

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
      dst[e] = static_cast<T>(std_dev *
                              init_normal(seed, tensor, static_cast<uint64_t>(t.full_element(e))));
    }
  }
}

template void init_params<float>(const ParamLayout&, uint64_t, std::span<float>, int);
template void init_params<double>(const ParamLayout&, uint64_t, std::span<double>, int);

}  // namespace meshloom::model
