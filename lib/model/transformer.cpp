#include "model/transformer.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "base/check.hpp"
#include "base/strings.hpp"
#include "model/blas.hpp"
#include "model/math.hpp"
#include "model/rope_angles.hpp"
#include "model/row_ops.hpp"

namespace meshloom::model {
namespace {

template <class V>
void fit(V& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}

}  // namespace

template <class T>
Transformer<T>::Transformer(const Shape& shape, const ModelOptions& opt, TpShard shard,
                            TpComm<T>* tp, StageLayers stage)
    : layout_(shape, shard, stage),
      tp_(shard.size > 1 ? tp : nullptr),
      sp_(shard.size > 1 && opt.sequence_parallel),
      my_(shape, shard),
      threads_(resolve_threads(opt.threads)),
      params_(static_cast<size_t>(layout_.numel())),
      grads_(static_cast<size_t>(layout_.numel())),
      local_attention_(AttnOptions{opt.attn_tile_q, opt.attn_tile_k, threads_}),
      loss_(LmLossOptions{opt.loss_chunk, threads_}) {
  ML_CHECK(shard.size == 1 || tp != nullptr, "a tensor-parallel model needs its TpComm");
  blas_use_one_thread();
  acts_.resize(static_cast<size_t>(shape.n_layers));
  x_.resize(static_cast<size_t>(shape.n_layers + 1));
}

template <class T>
std::span<T> Transformer<T>::param(const std::string& name) {
  const TensorInfo& t = layout_.find(name);
  return std::span<T>(params_).subspan(static_cast<size_t>(t.offset), static_cast<size_t>(t.numel));
}

template <class T>
std::span<T> Transformer<T>::grad(const std::string& name) {
  const TensorInfo& t = layout_.find(name);
  return std::span<T>(grads_).subspan(static_cast<size_t>(t.offset), static_cast<size_t>(t.numel));
}

template <class T>
void Transformer<T>::init_params(uint64_t seed) {
  model::init_params<T>(layout_, seed, params_, threads_);
}

template <class T>
void Transformer<T>::zero_grads() {
  std::fill(grads_.begin(), grads_.end(), T(0));
}

template <class T>
AttnDims Transformer<T>::attn_dims() const {
  return AttnDims{my_.heads, my_.kv_heads, shape().head_dim};
}

template <class T>
void Transformer<T>::ensure_buffers(int64_t n) {
  const Shape& s = shape();
  const int64_t d = s.d_model, f = my_.ffn;
  // This rank's rows: the most any rank of the group holds of n tokens.
  const int64_t m = sp_ ? sequence_rows(n, layout_.shard().size, 0).count() : n;
  const int64_t first = first_layer(), end = end_layer();
  x_.resize(static_cast<size_t>(s.n_layers + 1));  // after swap_activations with an empty set
  acts_.resize(static_cast<size_t>(s.n_layers));
  for (int64_t l = first; l <= end; ++l) fit(x_[static_cast<size_t>(l)], m * d);
  for (int64_t l = first; l < end; ++l) {
    LayerActs& a = acts_[static_cast<size_t>(l)];
    fit(a.xn1, m * d);
    fit(a.rstd1, m);
    fit(a.qkv, n * my_.qkv_dim);
    fit(a.o, n * my_.q_dim);
    fit(a.lse, n * my_.heads);
    fit(a.h, m * d);
    fit(a.xn2, m * d);
    fit(a.rstd2, m);
    fit(a.ab, n * 2 * f);
  }
  const bool last = layout_.last_stage();
  if (last) {
    fit(xf_, m * d);
    fit(rstdf_, m);
  }
  fit(u_, n * f);
  fit(dx_, m * d);
  fit(dxn_, m * d);
  // dab_ also holds the LM loss's chunk of logits in forward_backward().
  fit(dab_, std::max(n * 2 * f, last ? std::min(n, loss_.chunk()) * my_.vocab_rows : 0));
  fit(do_, n * my_.q_dim);
  fit(dqkv_, n * my_.qkv_dim);
  if (tp_) fit(partial_, n * d);
  if (sp_) {
    fit(gathered_, n * d);
    fit(gain_partials_, (2 * s.n_layers + 1) * d);
  }
  fit(token_loss_, n);
}

template <class T>
int64_t Transformer<T>::buffer_bytes() const {
  size_t elems = params_.capacity() + grads_.capacity() + xf_.capacity() + rstdf_.capacity();
  for (const auto& x : x_) elems += x.capacity();
  for (const LayerActs& a : acts_) {
    for (const auto* v : {&a.xn1, &a.rstd1, &a.qkv, &a.o, &a.lse, &a.h, &a.xn2, &a.rstd2, &a.ab})
      elems += v->capacity();
  }
  for (const auto* v : {&u_, &dx_, &dxn_, &dab_, &do_, &dqkv_, &partial_, &gathered_,
                        &gain_partials_, &rope_cos_, &rope_sin_})
    elems += v->capacity();
  const size_t ids =
      tokens_.capacity() + targets_.capacity() + positions_.capacity() + samples_.capacity();
  return static_cast<int64_t>(elems * sizeof(T) + ids * sizeof(int32_t) +
                              token_loss_.capacity() * sizeof(double)) +
         loss_.buffer_bytes();
}

template <class T>
void Transformer<T>::fill_rope(int64_t n) {
  // Per token rather than per position: positions of a long sequence's chunk
  // can be large while the micro-batch stays small. Angles in double.
  const int64_t half = shape().head_dim / 2;
  fit(rope_cos_, n * half);
  fit(rope_sin_, n * half);
  std::vector<double> freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    freq[static_cast<size_t>(i)] =
        rope_frequency(i, shape().head_dim, shape().rope_theta, shape().rope_scaling);
  }
  T* cs = rope_cos_.data();
  T* sn = rope_sin_.data();
  const int32_t* pos = positions_.data();
#pragma omp parallel for num_threads(threads_) schedule(static) if (n * half > 4096)
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(pos[t]) * freq[static_cast<size_t>(i)];
      cs[t * half + i] = static_cast<T>(std::cos(angle));
      sn[t * half + i] = static_cast<T>(std::sin(angle));
    }
  }
}

template <class T>
LossSum Transformer<T>::forward(const Batch& batch, AttentionBackend<T>* attention) {
  ML_CHECK(layout_.first_stage() && layout_.last_stage(),
           "forward() runs the whole model; a pipeline stage runs forward_stage()");
  const T* xf = forward_states(batch, attention, {});
  return loss_.forward(xf, n_, head_shard(), targets_.data(), vocab_reducer(), token_loss_,
                       &profile_);
}

template <class T>
LossSum Transformer<T>::forward_backward(const Batch& batch, double scale,
                                         AttentionBackend<T>* attention, std::span<const T> input) {
  ML_CHECK(layout_.last_stage(), "forward_backward() runs on the last pipeline stage");
  const T* xf = forward_states(batch, attention, input);
  // The loss writes d(final states) and d(head) scaled, its logits in dab_,
  // which backward does not need until the first layer.
  const LossGrads<T> grads{scale, input_grad_partials(), grads_.data() + layout_.head(), dab_};
  const LossSum ls = loss_.forward_with_grads(xf, n_, head_shard(), targets_.data(),
                                              vocab_reducer(), token_loss_, grads, &profile_);
  backward_from_final_states();
  return ls;
}

template <class T>
LossSum Transformer<T>::forward_loss(const Batch& batch, AttentionBackend<T>* attention,
                                     std::span<const T> input) {
  ML_CHECK(layout_.last_stage(), "forward_loss() runs on the last pipeline stage");
  const T* xf = forward_states(batch, attention, input);
  const LossSum ls = loss_.forward_loss_only(xf, n_, head_shard(), targets_.data(), vocab_reducer(),
                                             token_loss_, dab_, &profile_);
  have_forward_ = false;  // the loss kept no gradient for backward()
  return ls;
}

template <class T>
void Transformer<T>::forward_stage(const Batch& batch, std::span<const T> input,
                                   AttentionBackend<T>* attention) {
  ML_CHECK(!layout_.last_stage(), "the last pipeline stage runs forward_backward()");
  forward_states(batch, attention, input);
}

template <class T>
std::span<const T> Transformer<T>::output() const {
  const auto& x = x_[static_cast<size_t>(end_layer())];
  return {x.data(), static_cast<size_t>(rows_.count() * shape().d_model)};
}

template <class T>
std::span<const T> Transformer<T>::input_grad() const {
  return {dx_.data(), static_cast<size_t>(rows_.count() * shape().d_model)};
}

template <class T>
void Transformer<T>::backward_stage(std::span<const T> d_output) {
  ML_CHECK(have_forward_ && !layout_.last_stage(),
           "backward_stage() needs a forward_stage() first");
  ML_CHECK(static_cast<int64_t>(d_output.size()) == rows_.count() * shape().d_model,
           "d(output) does not match the stage's rows");
  std::copy(d_output.begin(), d_output.end(), dx_.begin());
  if (sp_) std::fill(gain_partials_.begin(), gain_partials_.end(), T(0));
  backward_layers();
}

template <class T>
void Transformer<T>::swap_activations(Activations& other) {
  std::swap(n_, other.n);
  std::swap(rows_, other.rows);
  std::swap(have_forward_, other.have_forward);
  tokens_.swap(other.tokens);
  targets_.swap(other.targets);
  positions_.swap(other.positions);
  samples_.swap(other.samples);
  patches_.swap(other.patches);
  x_.swap(other.x);
  acts_.swap(other.acts);
  rope_cos_.swap(other.rope_cos);
  rope_sin_.swap(other.rope_sin);
  std::swap(attention_, other.attention);
}

template <class T>
HeadShard<T> Transformer<T>::head_shard() const {
  return {params_.data() + layout_.head(), my_.vocab_first, my_.vocab_rows, shape().d_model};
}

template <class T>
VocabReducer& Transformer<T>::vocab_reducer() {
  return tp_ ? static_cast<VocabReducer&>(*tp_) : whole_vocab_;
}

template <class T>
const T* Transformer<T>::forward_states(const Batch& batch, AttentionBackend<T>* attention,
                                        std::span<const T> input) {
  const Shape& s = shape();
  batch.validate(s.vocab, s.patch_dim);
  const int64_t n = batch.size();
  const int64_t d = s.d_model;
  n_ = n;
  rows_ = sp_ ? sequence_rows(n, layout_.shard().size, layout_.shard().rank) : RowRange{0, n};
  tokens_ = batch.tokens;
  targets_ = batch.targets;
  positions_ = batch.positions;
  samples_ = batch.samples;
  patches_ = batch.patches;
  attention_ = attention ? attention : &local_attention_;
  have_forward_ = true;
  ensure_buffers(n);
  {
    Timer t(&profile_, &Times::other, threads_);
    fill_rope(n);
  }

  if (layout_.first_stage()) {
    embed_forward(n);
  } else {
    ML_CHECK(static_cast<int64_t>(input.size()) == rows_.count() * d,
             strf("a pipeline stage's input has %zu values, not %lld rows of %lld", input.size(),
                  static_cast<long long>(rows_.count()), static_cast<long long>(d)));
    std::copy(input.begin(), input.end(), x_[static_cast<size_t>(first_layer())].begin());
  }
  for (int64_t l = first_layer(); l < end_layer(); ++l) layer_forward(l, n);
  if (!layout_.last_stage()) return nullptr;

  {
    Timer t(&profile_, &Times::other, threads_);
    rmsnorm_forward(threads_, rows_.count(), d, x_[static_cast<size_t>(s.n_layers)].data(),
                    params_.data() + layout_.final_norm(), xf_.data(), rstdf_.data(), s.norm_eps);
  }
  // The head (vocabulary-parallel at tp > 1) runs on all n tokens.
  return all_rows(xf_.data(), n);
}

template <class T>
void Transformer<T>::embed_forward(int64_t n) {
  const int64_t d = shape().d_model;
  // A rank looks up the tokens of its vocabulary rows (all of them at
  // tp = 1), zero for the others: a row-parallel product, summed over the
  // group (or reduce-scattered) below.
  T* looked_up = sp_ ? partial_.data() : x_[0].data();
  {
    Timer t(&profile_, &Times::other, threads_);
    const T* embed = params_.data() + layout_.embed();
    const int64_t v0 = my_.vocab_first, vrows = my_.vocab_rows;
#pragma omp parallel for num_threads(threads_) schedule(static) if (n * d > kParallelElems)
    for (int64_t i = 0; i < n; ++i) {
      const int64_t r = static_cast<int64_t>(tokens_[static_cast<size_t>(i)]) - v0;
      if (r >= 0 && r < vrows) {
        std::copy(embed + r * d, embed + (r + 1) * d, looked_up + i * d);
      } else {
        std::fill(looked_up + i * d, looked_up + (i + 1) * d, T(0));
      }
    }
    patch_forward(looked_up);
  }
  if (!tp_) return;
  if (sp_) return scatter_rows(looked_up, x_[0].data(), n);
  sum_over_group(x_[0].data(), n * d);
}

template <class T>
void Transformer<T>::layer_forward(int64_t l, int64_t n) {
  const Shape& s = shape();
  const int64_t d = s.d_model, f = my_.ffn, qd = my_.q_dim, kvd = my_.kv_dim, qkvd = my_.qkv_dim;
  const LayerOffsets& o = layout_.layer(l);
  const T* P = params_.data();
  LayerActs& A = acts_[static_cast<size_t>(l)];
  const T* x = x_[static_cast<size_t>(l)].data();
  T* x_next = x_[static_cast<size_t>(l + 1)].data();
  const int64_t m = rows_.count();  // this rank's rows of x, h and the norms
  {
    Timer t(&profile_, &Times::other, threads_);
    rmsnorm_forward(threads_, m, d, x, P + o.attn_norm, A.xn1.data(), A.rstd1.data(),
                    shape().norm_eps);
  }
  {
    const T* xn1 = all_rows(A.xn1.data(), n);
    // q | k | v in one product: wq, wk, wv are adjacent
    Timer t(&profile_, &Times::matmul, threads_);
    gemm_parallel<T>(threads_, Op::N, Op::T, n, qkvd, d, T(1), xn1, d, P + o.wq, d, T(0),
                     A.qkv.data(), qkvd);
  }
  {
    Timer t(&profile_, &Times::other, threads_);
    rope_apply(threads_, n, my_.heads + my_.kv_heads, s.head_dim, A.qkv.data(), qkvd,
               rope_cos_.data(), rope_sin_.data(), false);
  }
  {
    Timer t(&profile_, &Times::attention, threads_);
    const QueryBlock<T> q{A.qkv.data(), qkvd, samples_.data(), positions_.data(), n};
    const KvBlock<T> kv{A.qkv.data() + qd, A.qkv.data() + qd + kvd, qkvd, qkvd,
                        samples_.data(),   positions_.data(),       n};
    attention_->forward(static_cast<int>(l), attn_dims(), q, kv,
                        AttnOut<T>{A.o.data(), qd, A.lse.data()});
  }
  // h = x + o·woᵀ (row-parallel over this rank's heads at tp > 1).
  row_parallel_residual(A.o.data(), qd, P + o.wo, x, A.h.data(), n);
  {
    Timer t(&profile_, &Times::other, threads_);
    rmsnorm_forward(threads_, m, d, A.h.data(), P + o.mlp_norm, A.xn2.data(), A.rstd2.data(),
                    shape().norm_eps);
  }
  {
    const T* xn2 = all_rows(A.xn2.data(), n);
    Timer t(&profile_, &Times::matmul, threads_);  // w1 | w3 in one product
    gemm_parallel<T>(threads_, Op::N, Op::T, n, 2 * f, d, T(1), xn2, d, P + o.w1, d, T(0),
                     A.ab.data(), 2 * f);
  }
  {
    Timer t(&profile_, &Times::other, threads_);
    swiglu_forward(threads_, n, f, A.ab.data(), u_.data());
  }
  // x_next = h + u·w2ᵀ (row-parallel over this rank's FFN columns at tp > 1).
  row_parallel_residual(u_.data(), f, P + o.w2, A.h.data(), x_next, n);
}

template <class T>
void Transformer<T>::backward(double scale) {
  ML_CHECK(have_forward_, "backward() needs a forward() first");
  loss_.backward(scale, input_grad_partials(), grads_.data() + layout_.head(), &profile_);
  backward_from_final_states();
}

template <class T>
void Transformer<T>::backward_from_final_states() {
  const Shape& s = shape();
  const int64_t n = n_, m = rows_.count(), d = s.d_model;
  if (sp_) std::fill(gain_partials_.begin(), gain_partials_.end(), T(0));
  reduce_input_grad(n);  // d(final states): this vocabulary shard's part at tp > 1
  {
    Timer t(&profile_, &Times::other, threads_);
    const T* xl = x_[static_cast<size_t>(s.n_layers)].data();
    const T* g = params_.data() + layout_.final_norm();
    rmsnorm_backward(threads_, m, d, dxn_.data(), xl, g, rstdf_.data(),
                     static_cast<const T*>(nullptr), dx_.data());
    rmsnorm_gain_grad(threads_, m, d, dxn_.data(), xl, rstdf_.data(), gain_grad(2 * s.n_layers));
  }
  backward_layers();
}

template <class T>
void Transformer<T>::backward_layers() {
  for (int64_t l = end_layer() - 1; l >= first_layer(); --l) layer_backward(l, n_);
  if (layout_.first_stage()) embed_backward(n_);
  if (sp_) sum_gain_grads();
}

template <class T>
void Transformer<T>::embed_backward(int64_t n) {
  const int64_t d = shape().d_model;
  const T* dx = all_rows(dx_.data(), n);
  {
    // Embedding rows: column blocks per thread, rows in order (deterministic).
    Timer t(&profile_, &Times::other, threads_);
    T* ge = grads_.data() + layout_.embed();
    constexpr int64_t kBlock = 64;
    const int64_t blocks = (d + kBlock - 1) / kBlock;
    // This rank's vocabulary rows; dx holds every token.
    const int64_t v0 = my_.vocab_first, vrows = my_.vocab_rows;
#pragma omp parallel for num_threads(threads_) schedule(static) if (n * d > kParallelElems)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t c0 = b * kBlock, c1 = std::min(d, c0 + kBlock);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t r = static_cast<int64_t>(tokens_[static_cast<size_t>(i)]) - v0;
        if (r < 0 || r >= vrows) continue;
        T* row = ge + r * d;
        const T* src = dx + i * d;
        for (int64_t c = c0; c < c1; ++c) row[c] += src[c];
      }
    }
    patch_backward(dx);
  }
}

// Where the image positions are, in order: patch k belongs to position [k].
static std::vector<int64_t> image_positions(const std::vector<int32_t>& tokens) {
  std::vector<int64_t> at;
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] == kImagePosition) at.push_back(static_cast<int64_t>(i));
  return at;
}

template <class T>
void Transformer<T>::patch_forward(T* out) {
  // At tp > 1 the embedding is a sum over the group: one rank adds the images.
  if (layout_.patch_embed() < 0 || layout_.shard().rank != 0) return;
  const std::vector<int64_t> at = image_positions(tokens_);
  const int64_t d = shape().d_model, p = shape().patch_dim, images = std::ssize(at);
  const T* w = params_.data() + layout_.patch_embed();
#pragma omp parallel for num_threads(threads_) schedule(static) if (images * d * p > kParallelElems)
  for (int64_t k = 0; k < images; ++k) {
    const float* patch = patches_.data() + k * p;
    T* row = out + at[static_cast<size_t>(k)] * d;
    for (int64_t c = 0; c < d; ++c) {
      T sum = 0;
      for (int64_t j = 0; j < p; ++j) sum += w[c * p + j] * static_cast<T>(patch[j]);
      row[c] = sum;
    }
  }
}

// Rows of patch_embed per thread, image positions in order (deterministic).
template <class T>
void Transformer<T>::patch_backward(const T* dx) {
  if (layout_.patch_embed() < 0) return;
  const std::vector<int64_t> at = image_positions(tokens_);
  const int64_t d = shape().d_model, p = shape().patch_dim, images = std::ssize(at);
  T* gw = grads_.data() + layout_.patch_embed();
#pragma omp parallel for num_threads(threads_) schedule(static) if (images * d * p > kParallelElems)
  for (int64_t c = 0; c < d; ++c) {
    T* grow = gw + c * p;
    for (int64_t k = 0; k < images; ++k) {
      const T g = dx[at[static_cast<size_t>(k)] * d + c];
      const float* patch = patches_.data() + k * p;
      for (int64_t j = 0; j < p; ++j) grow[j] += g * static_cast<T>(patch[j]);
    }
  }
}

template <class T>
void Transformer<T>::layer_backward(int64_t l, int64_t n) {
  const Shape& s = shape();
  const int64_t d = s.d_model, f = my_.ffn, qd = my_.q_dim, kvd = my_.kv_dim, qkvd = my_.qkv_dim;
  const LayerOffsets& o = layout_.layer(l);
  const T* P = params_.data();
  T* G = grads_.data();
  LayerActs& A = acts_[static_cast<size_t>(l)];
  const T* x = x_[static_cast<size_t>(l)].data();
  const int64_t m = rows_.count();  // this rank's rows of x, h, the norms and dx_, dxn_
  // dx_ holds ∂/∂(layer output), then ∂/∂h (in place: the norms' backward
  // adds the residual's gradient element by element), then ∂/∂(layer input).
  // MLP branch: out = h + (silu(a)⊙b)·w2ᵀ.
  {
    Timer t(&profile_, &Times::other, threads_);
    swiglu_forward(threads_, n, f, A.ab.data(), u_.data());
  }
  {
    const T* dout = all_rows(dx_.data(), n);
    Timer t(&profile_, &Times::matmul, threads_);
    gemm_parallel<T>(threads_, Op::N, Op::N, n, f, d, T(1), dout, d, P + o.w2, f, T(0),
                     dab_.data() + n * f, f);  // du, parked in the second half of dab_
    gemm_parallel<T>(threads_, Op::T, Op::N, d, f, n, T(1), dout, d, u_.data(), f, T(1), G + o.w2,
                     f);
  }
  {
    Timer t(&profile_, &Times::other, threads_);
    // du lives in u_'s place from here on (u_ is no longer needed).
    std::copy(dab_.data() + n * f, dab_.data() + 2 * n * f, u_.data());
    swiglu_backward(threads_, n, f, A.ab.data(), u_.data(), dab_.data());
  }
  {
    // xn2 gathered again (not kept from forward) for w1|w3's gradient.
    const T* xn2 = all_rows(A.xn2.data(), n);
    Timer t(&profile_, &Times::matmul, threads_);
    gemm_parallel<T>(threads_, Op::N, Op::N, n, d, 2 * f, T(1), dab_.data(), 2 * f, P + o.w1, d,
                     T(0), input_grad_partials(), d);
    gemm_parallel<T>(threads_, Op::T, Op::N, 2 * f, d, n, T(1), dab_.data(), 2 * f, xn2, d, T(1),
                     G + o.w1, d);
  }
  reduce_input_grad(n);  // partial over this rank's FFN columns
  {
    Timer t(&profile_, &Times::other, threads_);
    rmsnorm_backward(threads_, m, d, dxn_.data(), A.h.data(), P + o.mlp_norm, A.rstd2.data(),
                     static_cast<const T*>(dx_.data()), dx_.data());
    rmsnorm_gain_grad(threads_, m, d, dxn_.data(), A.h.data(), A.rstd2.data(),
                      gain_grad(2 * l + 1));
  }
  // Attention branch: h = x + o·woᵀ.
  {
    const T* dh = all_rows(dx_.data(), n);
    Timer t(&profile_, &Times::matmul, threads_);
    gemm_parallel<T>(threads_, Op::N, Op::N, n, qd, d, T(1), dh, d, P + o.wo, qd, T(0), do_.data(),
                     qd);
    gemm_parallel<T>(threads_, Op::T, Op::N, d, qd, n, T(1), dh, d, A.o.data(), qd, T(1), G + o.wo,
                     qd);
  }
  {
    Timer t(&profile_, &Times::attention, threads_);
    std::fill(dqkv_.begin(), dqkv_.begin() + n * qkvd, T(0));
    const QueryBlock<T> q{A.qkv.data(), qkvd, samples_.data(), positions_.data(), n};
    const KvBlock<T> kv{A.qkv.data() + qd, A.qkv.data() + qd + kvd, qkvd, qkvd,
                        samples_.data(),   positions_.data(),       n};
    const KvGrad<T> kvg{dqkv_.data() + qd, dqkv_.data() + qd + kvd, qkvd, qkvd};
    attention_->backward(static_cast<int>(l), attn_dims(), q, kv, A.o.data(), qd, A.lse.data(),
                         do_.data(), qd, dqkv_.data(), qkvd, kvg);
  }
  {
    Timer t(&profile_, &Times::other, threads_);
    rope_apply(threads_, n, my_.heads + my_.kv_heads, s.head_dim, dqkv_.data(), qkvd,
               rope_cos_.data(), rope_sin_.data(), true);
  }
  {
    const T* xn1 = all_rows(A.xn1.data(), n);  // gathered again, as xn2
    Timer t(&profile_, &Times::matmul, threads_);
    gemm_parallel<T>(threads_, Op::N, Op::N, n, d, qkvd, T(1), dqkv_.data(), qkvd, P + o.wq, d,
                     T(0), input_grad_partials(), d);
    gemm_parallel<T>(threads_, Op::T, Op::N, qkvd, d, n, T(1), dqkv_.data(), qkvd, xn1, d, T(1),
                     G + o.wq, d);
  }
  reduce_input_grad(n);  // partial over this rank's heads
  {
    Timer t(&profile_, &Times::other, threads_);
    rmsnorm_backward(threads_, m, d, dxn_.data(), x, P + o.attn_norm, A.rstd1.data(),
                     static_cast<const T*>(dx_.data()), dx_.data());
    rmsnorm_gain_grad(threads_, m, d, dxn_.data(), x, A.rstd1.data(), gain_grad(2 * l));
  }
}

double model_flops(const Shape& s, const Batch& batch) {
  const double d = static_cast<double>(s.d_model);
  const double per_layer_linear =
      2.0 * (d * static_cast<double>(s.qkv_dim()) + static_cast<double>(s.q_dim()) * d +
             3.0 * d * static_cast<double>(s.ffn_dim));
  const double linear =
      per_layer_linear * static_cast<double>(s.n_layers) + 2.0 * d * static_cast<double>(s.vocab);
  double visible = 0;  // Σ over queries of the keys they see
  for (int32_t p : batch.positions) visible += static_cast<double>(p) + 1.0;
  const double attention =
      4.0 * static_cast<double>(s.q_dim()) * visible * static_cast<double>(s.n_layers);
  const double patches = 2.0 * d * static_cast<double>(s.patch_dim * batch.images());
  return 3.0 * (linear * static_cast<double>(batch.size()) + attention + patches);
}

template class Transformer<float>;
template class Transformer<double>;

}  // namespace meshloom::model
