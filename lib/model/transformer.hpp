// The CPU model: forward and backward of docs/design.md's transformer over one
// packed micro-batch, in float (training) or double (gradient checks).
//
// How a trainer runs a micro-batch:
//
//   model::Transformer<float> m(model::Shape::from_config(cfg.model), {.threads = 2});
//   m.init_params(seed);                       // or copy a checkpoint into m.params()
//   m.zero_grads();
//   for (const Batch& mb : my_micro_batches) {
//     LossSum ls = m.forward(mb);              // Σ −log p over mb's targets, and their count
//     m.backward(1.0 / global_count);          // grads += (1/global_count)·∂Σ/∂params
//   }
//   all-reduce m.grads() (one flat buffer, ParamLayout order), then the optimizer.
//
// The loss is a SUM, and backward takes the scale, because the global batch's
// prediction count is only known to the trainer (the batch is split over
// trainers and micro-batches); so gradients add up to those of the global
// mean loss whatever the split. backward() accumulates (+=) into grads().
//
// What forward() keeps for backward(), per layer: the layer input, both
// normalized inputs and 1/rms, the fused QKV after RoPE, the attention output
// and its log-sum-exp, the residual after attention and the SwiGLU input
// [n, 2F]; plus the final normalized states and 1/rms. No [n, V] logits: the
// LM head and cross-entropy run fused, ModelOptions::loss_chunk tokens at a
// time (lm_loss.hpp), and forward() already leaves their gradients, unscaled,
// as d(final states) [n, d] and d(head) [V, d]; forward_backward(), which
// knows the scale, has it write them scaled into the model's own buffers and
// lends it backward scratch for its logits. Scratch is reused from call to
// call.
//
// Attention goes through an AttentionBackend (attention.hpp): LocalAttention
// by default; a context-parallel trainer passes its ring implementation to
// forward(), and the same object is used by the following backward().
//
// Images (Shape::patch_dim P > 0, batch.hpp): an image position's input is
// x = patch_embed · patch (patch_embed [d, P], no bias) instead of
// embed[token]; the decoder after it is the same, and image positions have
// target -1. patch_embed's gradient is Σ over image positions of
// d(x) ⊗ patch. At tp > 1 patch_embed is replicated: TP rank 0 adds the
// image rows to its part of the embedding's sum (the others add zero), and
// every rank computes the whole gradient from the whole d(x), the same bits
// everywhere, as for the norm gains. A pipeline's stage 0 holds
// patch_embed. A batch without image positions computes exactly what the
// text-only model does.
//
// Tensor parallelism (Megatron): built with TpShard{size, rank} and the
// group's TpComm, the model holds this rank's shards (ParamLayout(shape,
// shard)) and runs H/tp query heads, Hkv/tp KV heads and F/tp FFN columns.
// wq|wk|wv and w1|w3 are column-parallel (replicated input; the input's
// gradient is a partial sum, summed over the group before the norm's
// backward); wo and w2 are row-parallel (their product is a partial sum,
// summed before it is added to the residual). The embedding and the LM head
// are vocab-parallel: a rank looks up the tokens of its vocabulary rows (zero
// elsewhere, then summed), and the fused loss combines the shards' softmax
// statistics (lm_loss.hpp); d(final states) is summed before the final norm's
// backward. So the residual stream, the norms and the loss are replicated,
// and the norm gains' gradients come out the same on every TP rank: the
// trainer reduces gradients over the data axis only. Every rank of the group
// must run the same micro-batches in the same order. At tp = 1 nothing is
// summed and the code path is the single-rank one.
//
// Sequence parallelism (Megatron's; ModelOptions::sequence_parallel, tp > 1):
// the residual stream and the norms are split by tokens instead of
// replicated. TP rank r holds rows sequence_rows(n, tp, r) of the micro-
// batch (tensor_parallel.hpp): each sum of a row-parallel product (wo, w2,
// the embedding) becomes a reduce-scatter to the rank's rows, and the
// normalized rows are all-gathered before the column-parallel products
// (wq|wk|wv, w1|w3, the LM head), which, like attention, run on all n
// tokens. Backward mirrors it: the gradient of a reduce-scatter is an
// all-gather, that of an all-gather a reduce-scatter. The norm gains'
// gradients are then partial sums over a rank's rows: backward collects
// them apart and sums them over the group at its end (one small sum), so
// they stay the same bits on every rank. Of what forward() keeps, the layer
// inputs, h, both normalized inputs and their 1/rms, and the final states
// are the rank's rows only (about 1/tp of them); the gathered inputs of the
// column-parallel products are not kept but gathered again in backward. The
// loss runs on the gathered final states, so loss, counts and
// token_losses() are those of all n tokens, as without it. Forward's
// activations are the same bits as without it (the same sums in the same
// order); the gradients agree to rounding. At tp = 1 it changes nothing.
//
// Pipeline parallelism (Megatron's; built with StageLayers): the model holds
// the layers [first, end) of one stage (ParamLayout's stage layout). Stage 0
// embeds the tokens; any other takes its input, the residual stream
// entering its first layer, from the stage before (this rank's rows of it:
// all n without sequence parallelism). A stage other than the last runs
// forward_stage(), hands output() on, and later backward_stage() with
// d(output) from the stage after; the last runs forward_backward() (or, to
// evaluate, forward_loss()) with its input, which ends in the loss. After
// backward, input_grad() holds d(input) for the stage before (not on stage
// 0). A 1F1B schedule keeps several micro-batches between forward and
// backward: swap_activations() parks what forward kept for one and brings
// back another's.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/attention.hpp"
#include "model/batch.hpp"
#include "model/lm_loss.hpp"
#include "model/params.hpp"
#include "model/profile.hpp"
#include "model/tensor_parallel.hpp"

namespace meshloom::model {

struct ModelOptions {
  int threads = 0;  // 0: OpenMP's default (OMP_NUM_THREADS or the cores)
  int64_t attn_tile_q = 64;
  int64_t attn_tile_k = 128;
  int64_t loss_chunk = 512;  // tokens whose logits exist at once (lm_loss.hpp)
  // With tp > 1: split the residual stream and the norms by tokens over the
  // TP group (see above); ignored at tp = 1.
  bool sequence_parallel = false;
};

template <class T>
class Transformer {
 public:
  // The whole model (tp = 1), or TP rank `shard` of a group whose collectives
  // `tp` implements (not owned; must outlive the model; needed when
  // shard.size > 1, ignored otherwise).
  // With `stage`, only a pipeline stage's layers (see above).
  explicit Transformer(const Shape& shape, const ModelOptions& opt = {}, TpShard shard = {},
                       TpComm<T>* tp = nullptr, StageLayers stage = {});

  // The whole model's shape (this rank's sizes: layout().tensors()).
  const Shape& shape() const { return layout_.shape(); }
  const ParamLayout& layout() const { return layout_; }
  int threads() const { return threads_; }

  std::span<T> params() { return params_; }
  std::span<const T> params() const { return params_; }
  std::span<T> grads() { return grads_; }
  std::span<const T> grads() const { return grads_; }
  // Views of one named tensor (e.g. "layers.1.wq").
  std::span<T> param(const std::string& name);
  std::span<T> grad(const std::string& name);

  void init_params(uint64_t seed);
  void zero_grads();

  // Runs the micro-batch and keeps what backward() needs. `attention` (not
  // owned) must outlive the following backward(); null means LocalAttention.
  LossSum forward(const Batch& batch, AttentionBackend<T>* attention = nullptr);
  // grads += scale · ∂(forward's loss sum)/∂params. Needs a forward() first;
  // may be called again after each forward().
  void backward(double scale);
  // forward() then backward(scale), in less memory: with the scale known, the
  // LM loss writes its gradients straight into the model's and keeps its
  // chunk of logits in backward scratch (lm_loss.hpp). What a trainer runs.
  // `input`: the stage's input, on a last stage that is not the first.
  LossSum forward_backward(const Batch& batch, double scale,
                           AttentionBackend<T>* attention = nullptr, std::span<const T> input = {});
  // Forward through the loss with no gradient (evaluation): the same loss
  // sum and token_losses() as forward_backward(), grads() untouched, and
  // nothing kept for a backward() (which then fails). The logits reuse
  // backward scratch, as forward_backward(). `input` as for forward_backward().
  LossSum forward_loss(const Batch& batch, AttentionBackend<T>* attention = nullptr,
                       std::span<const T> input = {});

  // Pipeline stages other than the last (see above). `input` is ignored on
  // stage 0; else this rank's rows of the stage's input, [rows, d].
  void forward_stage(const Batch& batch, std::span<const T> input,
                     AttentionBackend<T>* attention = nullptr);
  // The residual stream leaving the stage's last layer (this rank's rows),
  // after forward_stage().
  std::span<const T> output() const;
  // grads += the stage's part, from d(output) (this rank's rows), after a
  // forward_stage() of the same micro-batch.
  void backward_stage(std::span<const T> d_output);
  // d(input) after a stage's backward (this rank's rows; not on stage 0).
  std::span<const T> input_grad() const;

  // What forward kept for backward, with its micro-batch: opaque to callers,
  // who keep one per micro-batch in flight. An empty one (default) is sized
  // by the next forward.
  struct LayerActs {
    std::vector<T> xn1, rstd1, qkv, o, lse, h, xn2, rstd2, ab;
  };
  struct Activations {
    int64_t n = 0;
    RowRange rows;
    bool have_forward = false;
    std::vector<int32_t> tokens, targets, positions, samples;
    std::vector<float> patches;
    std::vector<std::vector<T>> x;
    std::vector<LayerActs> acts;
    std::vector<T> rope_cos, rope_sin;
    AttentionBackend<T>* attention = nullptr;
  };
  // Trades the model's kept activations for `other`'s.
  void swap_activations(Activations& other);

  // −log p per token of the last forward() (0 where the target is −1).
  std::span<const double> token_losses() const {
    return std::span<const double>(token_loss_).first(static_cast<size_t>(n_));
  }

  const Profile& profile() const { return profile_; }
  void reset_profile() { profile_ = Profile{}; }
  // Allocates and touches the activation buffers for micro-batches of up to
  // `tokens` tokens now, so that a later, larger micro-batch does not pay for
  // fresh pages in the middle of a measured step.
  void reserve(int64_t tokens) { ensure_buffers(tokens); }
  // Bytes of every buffer the model holds now (parameters, gradients,
  // activations, scratch, the loss's): what plan/cost/host_memory.hpp estimates
  // (without sequence parallelism, which keeps less).
  int64_t buffer_bytes() const;

 private:
  void ensure_buffers(int64_t n);
  void fill_rope(int64_t n);
  // forward() through the stage's layers and, on the last stage, the final
  // norm: returns all n rows of its output xf_ (gathered with sequence
  // parallelism), null on other stages.
  const T* forward_states(const Batch& batch, AttentionBackend<T>* attention,
                          std::span<const T> input);
  // The stage's layers backward from d(their output) in dx_, and the
  // embedding's on stage 0.
  void backward_layers();
  int64_t first_layer() const { return layout_.stage().first; }
  int64_t end_layer() const { return layout_.stage().end; }
  // backward() from d(final states), the LM head's part in
  // input_grad_partials(), down to the embedding.
  void backward_from_final_states();
  HeadShard<T> head_shard() const;
  VocabReducer& vocab_reducer();
  void layer_forward(int64_t l, int64_t n);
  void layer_backward(int64_t l, int64_t n);
  // x_[0]: the token embeddings of this rank's rows.
  void embed_forward(int64_t n);
  void embed_backward(int64_t n);
  // Image positions (patch_dim > 0): out's rows there = patch_embed · patch;
  // and patch_embed's gradient += Σ d(row) ⊗ patch from dx [n, d].
  void patch_forward(T* out);
  void patch_backward(const T* dx);
  // out = base + in·wᵀ for a row-parallel w [d, k] and in [n, k]: one
  // product at tp = 1; else this rank's partial product summed over the
  // group, or reduce-scattered to this rank's rows (sequence parallelism;
  // base and out are then those rows).
  void row_parallel_residual(const T* in, int64_t k, const T* w, const T* base, T* out, int64_t n);
  // All n rows of a [rows, d] activation of which this rank holds its rows:
  // `mine` itself, or with sequence parallelism the group's rows gathered
  // into gathered_ (which the next call overwrites).
  const T* all_rows(const T* mine, int64_t n);
  // mine = this rank's rows of the group's sum of `all` [n, d] (sequence
  // parallelism's reduce-scatter).
  void scatter_rows(const T* all, T* mine, int64_t n);
  // Where the input gradient of a column-parallel product (a partial sum
  // over this rank's shard, all n rows) goes, and the step that turns it into
  // this rank's rows of the group's sum in dxn_.
  T* input_grad_partials();
  void reduce_input_grad(int64_t n);
  // Where backward adds norm gain `slot`'s gradient (slots: layer l's
  // attn_norm 2l, mlp_norm 2l + 1, final_norm 2·layers): grads_, or with
  // sequence parallelism gain_partials_, which sum_gain_grads() sums over
  // the group into grads_.
  T* gain_grad(int64_t slot);
  int64_t gain_offset(int64_t slot) const;
  void sum_gain_grads();
  // This rank's heads (q, KV) and head size.
  AttnDims attn_dims() const;
  // values summed over the TP group (tp > 1).
  void sum_over_group(T* values, int64_t count);

  ParamLayout layout_;
  TpComm<T>* tp_ = nullptr;  // null at tp = 1
  bool sp_ = false;          // sequence parallelism (tp > 1 only)
  ShardSizes my_;            // this rank's heads, FFN columns and vocabulary rows
  int threads_;
  std::vector<T> params_, grads_;
  LocalAttention<T> local_attention_;
  AttentionBackend<T>* attention_ = nullptr;

  // The micro-batch of the last forward(), and this rank's rows of it (all
  // n without sequence parallelism).
  int64_t n_ = 0;
  RowRange rows_;
  bool have_forward_ = false;
  std::vector<int32_t> tokens_, targets_, positions_, samples_;
  std::vector<float> patches_;  // P values per image position (Batch::patches)
  std::vector<double> token_loss_;

  // Activations (x_, h, xn1, xn2, their rstd, xf_, rstdf_: this rank's rows).
  std::vector<std::vector<T>> x_;  // residual stream entering layer l; x_[L] = final
  std::vector<LayerActs> acts_;
  std::vector<T> xf_, rstdf_;
  LmLoss<T> loss_;  // the head and cross-entropy, chunked; keeps their gradients
  WholeVocab whole_vocab_;
  // Backward scratch (dx_, dxn_: this rank's rows); partial_: a
  // row-parallel product before its sum, or with sequence parallelism an
  // input gradient before its reduce-scatter (tp > 1); gathered_: all rows
  // of one activation or gradient, gain_partials_: this micro-batch's norm
  // gain gradients over this rank's rows (sequence parallelism).
  std::vector<T> u_, dx_, dxn_, dab_, do_, dqkv_, partial_, gathered_, gain_partials_;
  // RoPE angles of this micro-batch: token t, frequency i at [t·D/2 + i].
  std::vector<T> rope_cos_, rope_sin_;

  Profile profile_;
};

// Model FLOPs of one forward + backward over `batch` (3 × the forward's matrix
// products; attention counts only (query, key) pairs the mask lets through,
// i.e. pos + 1 keys per query). What MFU is measured against. The whole
// model's: a TP rank does about 1/tp of it.
double model_flops(const Shape& shape, const Batch& batch);

}  // namespace meshloom::model
