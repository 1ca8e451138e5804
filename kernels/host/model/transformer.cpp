#include "kernels/host/model/transformer.hpp"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <type_traits>
#include <utility>

#include "base/check.hpp"
#include "kernels/device/common/check.cuh"
#include "kernels/device/model/cast.hpp"
#include "kernels/device/model/embedding.hpp"
#include "kernels/device/ops/lm_loss.hpp"
#include "kernels/device/ops/norm.hpp"
#include "kernels/device/ops/rope.hpp"
#include "kernels/device/ops/swiglu.hpp"
#include "kernels/host/model/attention_choice.hpp"

namespace meshloom::cuda {

using model::Op;

namespace {

template <class T>
void copy_async(T* dst, const T* src, int64_t n, cudaStream_t stream) {
  if (n > 0)
    CUDA_CHECK(cudaMemcpyAsync(dst, src, size_t(n) * sizeof(T), cudaMemcpyDeviceToDevice, stream));
}

template <class T>
void upload_async(DeviceBuffer<T>& dst, const std::vector<T>& src, cudaStream_t stream) {
  dst.resize(src.size());
  if (!src.empty())
    CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), src.size() * sizeof(T),
                               cudaMemcpyHostToDevice, stream));
}

}  // namespace

template <class T>
Transformer<T>::Transformer(const model::Shape& shape, cudaStream_t stream, int64_t loss_chunk,
                            model::TpShard shard, DeviceTpComm<T>* tp, model::StageLayers stage)
    : layout_(shape, shard, stage),
      first_(layout_.stage().first),
      end_(layout_.stage().end),
      tp_(shard.size > 1 ? tp : nullptr),
      my_(shape, shard),
      vocab_{my_.vocab_first, my_.vocab_rows},
      stream_(stream),
      blas_(stream),
      local_attention_(make_local_device_attention<T>()),
      store_(shape, shard, stream, end_ - first_),
      rope_(shape.head_dim, shape.rope_theta, shape.rope_scaling),
      loss_(loss_chunk, blas_, stream) {
  shape.validate();
  ML_CHECK(flash_attention_supports_head_dim(int(shape.head_dim)),
           "the CUDA backend's attention supports head_dim 64 and 128, not " +
               std::to_string(shape.head_dim));
  ML_CHECK(shard.size == 1 || (tp != nullptr && tp->size() == shard.size),
           "a tensor-parallel GPU model needs its TP group's communicator");
  ML_CHECK(shape.patch_dim == 0,
           "images (patch_dim > 0) with run.backend: cuda are not implemented yet: use "
           "run.backend: cpu");
  params_.resize(size_t(layout_.numel()));
  grads_.resize(size_t(layout_.numel()));
  zero_grads();
}

template <class T>
void Transformer<T>::set_params(std::span<const float> master_host) {
  ML_CHECK(int64_t(master_host.size()) == layout_.numel(), "set_params: wrong parameter count");
  // Staged on stream_ itself: a plain cudaMemcpy runs on the legacy default
  // stream, which does not order with a non-blocking stream_ (and may return
  // before its DMA from pageable memory is done).
  DeviceBuffer<float> staged(master_host.size());
  CUDA_CHECK(cudaMemcpyAsync(staged.data(), master_host.data(), master_host.size() * sizeof(float),
                             cudaMemcpyHostToDevice, stream_));
  set_params_device(staged.data());
  CUDA_CHECK(cudaStreamSynchronize(stream_));  // `staged` is freed on return
}

template <class T>
void Transformer<T>::set_params_device(const float* master) {
  convert<float, T>(master, layout_.numel(), params_.data(), stream_);
}

template <class T>
std::vector<float> Transformer<T>::download_grads() const {
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  return grads_.download();
}

template <class T>
void Transformer<T>::zero_grads() {
  grads_.zero(stream_);
}

template <class T>
FlashDims Transformer<T>::dims() const {
  return FlashDims{int(my_.heads), int(my_.kv_heads), int(layout_.shape().head_dim)};
}

template <class T>
void Transformer<T>::sum_over_group(T* values, int64_t count) {
  tp_->sum_activations(values, count, stream_);
}

template <class T>
void Transformer<T>::add_row_parallel(const T* residual, const T* a, int64_t k, const T* w, T* out,
                                      int64_t n) {
  const int64_t d = layout_.shape().d_model;
  // At tp > 1 only TP rank 0 adds the residual to its partial product.
  const bool with_residual = !tp_ || layout_.shard().rank == 0;
  if (with_residual) copy_async(out, residual, n * d, stream_);
  mm(Op::N, Op::T, n, d, k, 1.0f, a, k, w, k, with_residual ? 1.0f : 0.0f, out, d);
  if (tp_) sum_over_group(out, n * d);
}

template <class T>
void Transformer<T>::mm(Op oa, Op ob, int64_t m, int64_t n, int64_t k, float alpha, const T* a,
                        int64_t lda, const T* b, int64_t ldb, float beta, T* c, int64_t ldc) {
  blas_.gemm(oa, ob, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, dtype_of<T>(), dtype_of<T>());
}

template <class T>
void Transformer<T>::mm_grad(Op oa, Op ob, int64_t m, int64_t n, int64_t k, float alpha, const T* a,
                             int64_t lda, const T* b, int64_t ldb, float* c, int64_t ldc) {
  blas_.gemm(oa, ob, m, n, k, alpha, a, lda, b, ldb, 1.0f, c, ldc, dtype_of<T>(), Dtype::f32);
}

template <class T>
void Transformer<T>::ensure_buffers(int64_t n) {
  if (n <= capacity_) return;
  const size_t N = size_t(n), d = size_t(layout_.shape().d_model), f = size_t(my_.ffn);
  const size_t qd = size_t(my_.q_dim), qkvd = size_t(my_.qkv_dim);
  x_final_.resize(N * d);
  xf_.resize(N * d);
  rstdf_.resize(N);
  row_loss_.resize(N);
  loss_sum_.resize(1);
  count_.resize(1);
  u_.resize(N * f);
  du_.resize(N * f);
  dx_.resize(N * d);
  dh_.resize(N * d);
  dxn_.resize(N * d);
  dab_.resize(N * 2 * f);
  do_.resize(N * qd);
  dqkv_.resize(N * qkvd);
  if constexpr (!std::is_same_v<T, float>) dqkv_t_.resize(N * qkvd);
  capacity_ = n;
}

template <class T>
model::LossSum Transformer<T>::forward(const model::Batch& batch, DeviceAttention<T>* attention,
                                       int offloaded, const T* input) {
  const model::Shape& s = layout_.shape();
  batch.validate(s.vocab);
  const int64_t n = batch.size(), d = s.d_model;
  ML_CHECK(n > 0, "forward: empty micro-batch");
  ML_CHECK(layout_.first_stage() || input, "forward: a later pipeline stage needs its input");
  n_ = n;
  attention_ = attention ? attention : local_attention_.get();
  have_forward_ = true;
  ensure_buffers(n);
  rope_.cover(batch.positions);
  store_.begin(n, offloaded);
  upload_async(tokens_, batch.tokens, stream_);
  upload_async(targets_, batch.targets, stream_);
  upload_async(positions_, batch.positions, stream_);
  upload_async(samples_, batch.samples, stream_);
  const EmbeddingGroups groups = group_tokens(batch.tokens, vocab_);
  upload_async(embed_ids_, groups.ids, stream_);
  upload_async(embed_offsets_, groups.offsets, stream_);
  upload_async(embed_order_, groups.order, stream_);
  embed_groups_ = int64_t(groups.ids.size());

  const T* P = params_.data();
  store_.claim(0);
  T* x0 = end_ > first_ ? store_[0].x.data() : x_final_.data();
  if (!layout_.first_stage()) {
    copy_async(x0, input, n * d, stream_);  // the stage before's output
  } else {
    // This rank's vocabulary rows (all of them at tp = 1); zero for the other
    // tokens, summed over the group.
    embedding_forward<T>(P + layout_.embed(), vocab_, tokens_.data(), n, d, x0, stream_);
    if (tp_) sum_over_group(x0, n * d);
  }
  for (int64_t l = first_; l < end_; ++l) {
    layer_forward(l, n);  // claims l + 1 just before writing its input
    store_.saved(l - first_);
  }
  if (!layout_.last_stage()) return {};  // output() goes to the next stage

  rmsnorm_forward<T>(x_final_.data(), P + layout_.final_norm(), n, d, xf_.data(), rstdf_.data(),
                     layout_.shape().norm_eps, stream_);
  const DeviceHead<T> head{P + layout_.head(), vocab_, d};
  loss_.forward(xf_.data(), n, head, targets_.data(), tp_, row_loss_.data());
  lm_loss_total(row_loss_.data(), targets_.data(), n, loss_sum_.data(), count_.data(), stream_);
  model::LossSum out;
  CUDA_CHECK(
      cudaMemcpyAsync(&out.sum, loss_sum_.data(), sizeof(double), cudaMemcpyDeviceToHost, stream_));
  CUDA_CHECK(
      cudaMemcpyAsync(&out.count, count_.data(), sizeof(int64_t), cudaMemcpyDeviceToHost, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  return out;
}

template <class T>
void Transformer<T>::layer_forward(int64_t l, int64_t n) {
  const model::Shape& s = layout_.shape();
  const int64_t d = s.d_model, f = my_.ffn, qd = my_.q_dim, kvd = my_.kv_dim, qkvd = my_.qkv_dim;
  const model::LayerOffsets& o = layout_.layer(l);
  const T* P = params_.data();
  LayerActs<T>& A = acts(l);
  const T* x = A.x.data();
  T* x_next = l + 1 < end_ ? acts(l + 1).x.data() : x_final_.data();

  rmsnorm_forward<T>(x, P + o.attn_norm, n, d, A.xn1.data(), A.rstd1.data(),
                     layout_.shape().norm_eps, stream_);
  mm(Op::N, Op::T, n, qkvd, d, 1.0f, A.xn1.data(), d, P + o.wq, d, 0.0f, A.qkv.data(), qkvd);
  rope_forward<T>(A.qkv.data(), qkvd, positions_.data(), n, my_.heads + my_.kv_heads, s.head_dim,
                  rope_.angles(), stream_);
  const FlashQuery<T> q{A.qkv.data(), qkvd, samples_.data(), positions_.data(), n};
  const FlashKv<T> kv{A.qkv.data() + qd, A.qkv.data() + qd + kvd, qkvd, qkvd,
                      samples_.data(),   positions_.data(),       n};
  attention_->forward(int(l), dims(), q, kv, FlashOut<T>{A.o.data(), qd, A.lse.data()}, stream_);
  add_row_parallel(x, A.o.data(), qd, P + o.wo, A.h.data(), n);  // h = x + o·woᵀ
  rmsnorm_forward<T>(A.h.data(), P + o.mlp_norm, n, d, A.xn2.data(), A.rstd2.data(),
                     layout_.shape().norm_eps, stream_);
  mm(Op::N, Op::T, n, 2 * f, d, 1.0f, A.xn2.data(), d, P + o.w1, d, 0.0f, A.ab.data(), 2 * f);
  swiglu_forward<T>(A.ab.data(), n, f, u_.data(), stream_);
  // Only now wait for the slot of layer l + 1 (layer l − 1's, on its way to
  // the host): the copy overlaps all of layer l's compute above.
  store_.claim(l + 1 - first_);
  add_row_parallel(A.h.data(), u_.data(), f, P + o.w2, x_next, n);  // x_next = h + u·w2ᵀ
}

template <class T>
void Transformer<T>::backward(double scale, const FinalRange& final_range, const T* d_output) {
  ML_CHECK(have_forward_, "backward() needs a forward() first");
  ML_CHECK(layout_.last_stage() || d_output, "backward: a pipeline stage needs d(output)");
  const model::Shape& s = layout_.shape();
  const int64_t n = n_, d = s.d_model, f = my_.ffn;
  const T* P = params_.data();
  float* G = grads_.data();
  auto done = [&](int64_t offset, int64_t count) {
    if (final_range) final_range(offset, count);
  };
  if (layout_.last_stage()) {
    // The loss's gradients, kept by forward: dxf = scale·∂/∂xf, dhead += scale·∂/∂head.
    loss_.backward(float(scale), dxn_.data(), G + layout_.head());
    if (tp_) sum_over_group(dxn_.data(), n * d);  // this vocabulary shard's part
    // Tied, the embedding's backward (stage 0's) adds to the head last.
    if (!s.tied || !layout_.first_stage()) done(layout_.head(), vocab_.rows * d);
    rmsnorm_backward<T>(dxn_.data(), x_final_.data(), P + layout_.final_norm(), rstdf_.data(),
                        nullptr, n, d, dx_.data(), G + layout_.final_norm(), stream_);
    done(layout_.final_norm(), d);
  } else {
    copy_async(dx_.data(), d_output, n * d, stream_);
  }
  for (int64_t l = end_ - 1; l >= first_; --l) {
    store_.need(l - first_);
    layer_backward(l, n);
    store_.done(l - first_);
    // A layer's tensors are contiguous, attn_norm first and w2 last.
    const model::LayerOffsets& o = layout_.layer(l);
    done(o.attn_norm, o.w2 + d * f - o.attn_norm);
  }
  if (!layout_.first_stage()) return;  // input_grad() goes to the stage before
  embedding_backward<T>(dx_.data(), embed_ids_.data(), embed_offsets_.data(), embed_order_.data(),
                        embed_groups_, d, G + layout_.embed(), stream_);
  done(layout_.embed(), vocab_.rows * d);
}

template <class T>
void Transformer<T>::layer_backward(int64_t l, int64_t n) {
  const model::Shape& s = layout_.shape();
  const int64_t d = s.d_model, f = my_.ffn, qd = my_.q_dim, kvd = my_.kv_dim, qkvd = my_.qkv_dim;
  const model::LayerOffsets& o = layout_.layer(l);
  const T* P = params_.data();
  float* G = grads_.data();
  LayerActs<T>& A = acts(l);
  const T* x = A.x.data();
  // dx_ holds ∂/∂(layer output). MLP branch: out = h + (silu(a)⊙b)·w2ᵀ.
  swiglu_forward<T>(A.ab.data(), n, f, u_.data(), stream_);
  mm(Op::N, Op::N, n, f, d, 1.0f, dx_.data(), d, P + o.w2, f, 0.0f, du_.data(), f);
  mm_grad(Op::T, Op::N, d, f, n, 1.0f, dx_.data(), d, u_.data(), f, G + o.w2, f);
  swiglu_backward<T>(A.ab.data(), du_.data(), n, f, dab_.data(), stream_);
  mm(Op::N, Op::N, n, d, 2 * f, 1.0f, dab_.data(), 2 * f, P + o.w1, d, 0.0f, dxn_.data(), d);
  mm_grad(Op::T, Op::N, 2 * f, d, n, 1.0f, dab_.data(), 2 * f, A.xn2.data(), d, G + o.w1, d);
  if (tp_) sum_over_group(dxn_.data(), n * d);  // partial over this rank's FFN columns
  rmsnorm_backward<T>(dxn_.data(), A.h.data(), P + o.mlp_norm, A.rstd2.data(), dx_.data(), n, d,
                      dh_.data(), G + o.mlp_norm, stream_);
  // Attention branch: h = x + o·woᵀ.
  mm(Op::N, Op::N, n, qd, d, 1.0f, dh_.data(), d, P + o.wo, qd, 0.0f, do_.data(), qd);
  mm_grad(Op::T, Op::N, d, qd, n, 1.0f, dh_.data(), d, A.o.data(), qd, G + o.wo, qd);
  CUDA_CHECK(cudaMemsetAsync(dqkv_.data(), 0, size_t(n * qkvd) * sizeof(float), stream_));
  const FlashQuery<T> q{A.qkv.data(), qkvd, samples_.data(), positions_.data(), n};
  const FlashKv<T> kv{A.qkv.data() + qd, A.qkv.data() + qd + kvd, qkvd, qkvd,
                      samples_.data(),   positions_.data(),       n};
  const FlashKvGrad kvg{dqkv_.data() + qd, dqkv_.data() + qd + kvd, qkvd, qkvd};
  attention_->backward(int(l), dims(), q, kv, A.o.data(), qd, A.lse.data(), do_.data(), qd,
                       dqkv_.data(), qkvd, kvg, stream_);
  // The attention gradients are fp32 accumulators: undo RoPE there, then
  // bring them to T for the products.
  rope_backward<float>(dqkv_.data(), qkvd, positions_.data(), n, my_.heads + my_.kv_heads,
                       s.head_dim, rope_.angles(), stream_);
  const T* dqkv;
  if constexpr (std::is_same_v<T, float>) {
    dqkv = dqkv_.data();
  } else {
    convert<float, T>(dqkv_.data(), n * qkvd, dqkv_t_.data(), stream_);
    dqkv = dqkv_t_.data();
  }
  mm(Op::N, Op::N, n, d, qkvd, 1.0f, dqkv, qkvd, P + o.wq, d, 0.0f, dxn_.data(), d);
  mm_grad(Op::T, Op::N, qkvd, d, n, 1.0f, dqkv, qkvd, A.xn1.data(), d, G + o.wq, d);
  if (tp_) sum_over_group(dxn_.data(), n * d);  // partial over this rank's heads
  rmsnorm_backward<T>(dxn_.data(), x, P + o.attn_norm, A.rstd1.data(), dh_.data(), n, d, dx_.data(),
                      G + o.attn_norm, stream_);
}

template <class T>
void Transformer<T>::swap_saved(Saved& saved) {
  store_.swap_resident(saved.layers);
  std::swap(positions_, saved.positions);
  std::swap(samples_, saved.samples);
  std::swap(embed_ids_, saved.embed_ids);
  std::swap(embed_offsets_, saved.embed_offsets);
  std::swap(embed_order_, saved.embed_order);
  std::swap(n_, saved.n);
  std::swap(embed_groups_, saved.embed_groups);
  std::swap(attention_, saved.attention);
  std::swap(have_forward_, saved.have_forward);
}

template <class T>
std::vector<double> Transformer<T>::token_losses() const {
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  std::vector<double> all = row_loss_.download();
  all.resize(size_t(n_));
  return all;
}

template class Transformer<float>;
template class Transformer<__nv_bfloat16>;

}  // namespace meshloom::cuda
