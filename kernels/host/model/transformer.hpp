// The GPU model: forward and backward of docs/design.md's transformer over one
// packed micro-batch, the twin of model::Transformer (lib/model/transformer.hpp),
// step for step: the same products (cuBLAS, kernels/host/blas), the same fused
// layouts (q|k|v and w1|w3 as one matrix each), the same saved activations.
//
//   cuda::Transformer<__nv_bfloat16> m(shape, stream);
//   m.set_params(master);                 // fp32 master weights (host or device)
//   m.zero_grads();
//   for (const Batch& mb : my_micro_batches) {
//     LossSum ls = m.forward(mb);         // Σ −log p over mb's targets, and their count
//     m.backward(1.0 / global_count);     // grads += scale·∂Σ/∂params (fp32, on the device)
//   }
//
// T is the type of the working weights and activations: __nv_bfloat16 for
// training (fp32 accumulation in every product and kernel, fp32 gradients),
// float for the checks against the CPU backend. Gradients are one flat fp32
// device buffer in ParamLayout order, so the trainer all-reduces one buffer
// and the optimizer walks it, exactly as on the CPU.
//
// The LM head and the cross-entropy run fused, `loss_chunk` tokens at a time
// (device_lm_loss.hpp): no [n, V] logits.
//
// Tensor parallelism (Megatron, as model::Transformer): built with
// TpShard{size, rank} and the group's DeviceTpComm, the model holds this
// rank's shards (ParamLayout(shape, shard)) and runs H/tp query heads, Hkv/tp
// KV heads and F/tp FFN columns; wq|wk|wv and w1|w3 are column-parallel, wo
// and w2 row-parallel, the embedding and the LM head vocab-parallel. The
// group sums, at the CPU model's places: forward, the embedding lookup and
// the wo and w2 products (TP rank 0 adds the residual into its partial
// product, the others start from zero, so the sum is the residual stream
// itself); backward, d(final states) and the input gradients of wq|wk|wv and
// w1|w3, before the norms' backward; the loss's statistics per chunk. Every
// rank of the group runs the same micro-batches in the same order.
//
// Pipeline parallelism (model::Transformer's; built with StageLayers): the
// model holds the layers [first, end) of one stage (ParamLayout's stage
// layout). Stage 0 embeds the tokens; any other stage's forward() starts
// from `input`, the residual stream entering its first layer. Only the last
// stage ends in the loss; the others leave their output in output() and
// their backward() starts from d(output). After backward(), input_grad()
// holds d(input) for the stage before (not on stage 0). A 1F1B schedule
// keeps several micro-batches between forward and backward: swap_saved()
// parks what forward kept for one and brings back another's.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "kernels/host/blas/gemm.hpp"
#include "kernels/host/device_buffer.hpp"
#include "kernels/host/model/activation_store.hpp"
#include "kernels/host/model/device_attention.hpp"
#include "kernels/host/model/device_lm_loss.hpp"
#include "kernels/host/model/device_rope_table.hpp"
#include "kernels/host/model/device_tp_comm.hpp"
#include "model/batch.hpp"
#include "model/params.hpp"
#include "model/transformer.hpp"

namespace meshloom::cuda {

template <class T>
class Transformer {
 public:
  // The whole model (tp = 1), or TP rank `shard` of a group whose
  // collectives `tp` implements (not owned; must outlive the model; needed
  // when shard.size > 1). `loss_chunk`: tokens whose logits exist at once.
  // With `stage`, only a pipeline stage's layers (see above).
  Transformer(const model::Shape& shape, cudaStream_t stream, int64_t loss_chunk = 1024,
              model::TpShard shard = {}, DeviceTpComm<T>* tp = nullptr,
              model::StageLayers stage = {});

  const model::ParamLayout& layout() const { return layout_; }
  cudaStream_t stream() const { return stream_; }

  // The working copy (type T) from fp32 master weights of layout().numel()
  // elements: a host span, or a device pointer.
  void set_params(std::span<const float> master_host);
  void set_params_device(const float* master);
  // The working copy itself, for an optimizer that refreshes it in place.
  T* params() { return params_.data(); }
  // fp32 gradients, ParamLayout order, on the device.
  float* grads() { return grads_.data(); }
  std::vector<float> download_grads() const;
  void zero_grads();

  // Runs the micro-batch and keeps what backward() needs; synchronizes the
  // stream once to return the loss. `attention` (not owned) must outlive the
  // following backward(); null means LocalDeviceAttention. The first
  // `offloaded` layers keep their activations in host memory between forward
  // and backward (selective offloading, activation_store.hpp).
  // `input` ([n, d] on the device): the stage's input, on a stage other
  // than the first. Other stages than the last return no loss and do not
  // synchronize.
  model::LossSum forward(const model::Batch& batch, DeviceAttention<T>* attention = nullptr,
                         int offloaded = 0, const T* input = nullptr);
  // grads += scale · ∂(forward's loss sum)/∂params; asynchronous on stream().
  // `final_range`, when set, is called with each range of the gradient
  // buffer (the LM head, the final norm, each layer from the last, the
  // embedding) right after the kernels that finish it are enqueued: the
  // gradient reduction may start there (kernels/host/comm/grad_reducer.hpp).
  using FinalRange = std::function<void(int64_t offset, int64_t count)>;
  // `d_output` ([n, d] on the device): d(output) from the stage after, on a
  // stage other than the last (whose `scale` is unused).
  void backward(double scale, const FinalRange& final_range = {}, const T* d_output = nullptr);
  // After forward(), on a stage other than the last: the residual stream
  // leaving its last layer, [n, d], until the next forward().
  const T* output() const { return x_final_.data(); }
  // After backward(), on a stage other than the first: d(input), [n, d],
  // until the next forward() or backward().
  const T* input_grad() const { return dx_.data(); }
  // The last forward()'s token count (after swap_saved(), the parked one's).
  int64_t tokens() const { return n_; }
  // What forward() keeps for backward() (the offloaded layers aside), so
  // that several micro-batches can wait between the two.
  struct Saved {
    std::vector<LayerActs<T>> layers;
    DeviceBuffer<int32_t> positions, samples, embed_ids, embed_offsets, embed_order;
    int64_t n = 0, embed_groups = 0;
    DeviceAttention<T>* attention = nullptr;
    bool have_forward = false;
  };
  // Swaps them with `saved` (its buffers are reused by the next forward).
  void swap_saved(Saved& saved);
  // −log p per token of the last forward() (0 where the target is −1).
  std::vector<double> token_losses() const;

 private:
  void ensure_buffers(int64_t n);
  void layer_forward(int64_t l, int64_t n);
  void layer_backward(int64_t l, int64_t n);
  FlashDims dims() const;
  // out = residual + a·wᵀ (a [n, k], w [d, k]), the wo and w2 products. At
  // tp > 1 (row-parallel) summed over the group, the residual added once.
  void add_row_parallel(const T* residual, const T* a, int64_t k, const T* w, T* out, int64_t n);
  // values summed over the TP group (tp > 1).
  void sum_over_group(T* values, int64_t count);
  // C = alpha·op(A)·op(B) + beta·C with A, B of type T; C of type T or fp32.
  void mm(model::Op oa, model::Op ob, int64_t m, int64_t n, int64_t k, float alpha, const T* a,
          int64_t lda, const T* b, int64_t ldb, float beta, T* c, int64_t ldc);
  void mm_grad(model::Op oa, model::Op ob, int64_t m, int64_t n, int64_t k, float alpha, const T* a,
               int64_t lda, const T* b, int64_t ldb, float* c, int64_t ldc);

  // The stage's layer l's activations (l: the whole model's index).
  LayerActs<T>& acts(int64_t l) { return store_[l - first_]; }

  model::ParamLayout layout_;
  int64_t first_, end_;            // the stage's layers
  DeviceTpComm<T>* tp_ = nullptr;  // null at tp = 1
  model::ShardSizes my_;           // this rank's heads, FFN columns and vocabulary rows
  VocabRows vocab_;
  cudaStream_t stream_;
  Blas blas_;
  DeviceBuffer<T> params_;
  DeviceBuffer<float> grads_;
  // The flash kernels or cuDNN (attention_choice.hpp: MESHLOOM_ATTENTION).
  std::unique_ptr<DeviceAttention<T>> local_attention_;
  DeviceAttention<T>* attention_ = nullptr;

  int64_t n_ = 0, capacity_ = 0;
  bool have_forward_ = false;
  DeviceBuffer<int32_t> tokens_, targets_, positions_, samples_;
  DeviceBuffer<int32_t> embed_ids_, embed_offsets_, embed_order_;
  int64_t embed_groups_ = 0;
  ActivationStore<T> store_;
  DeviceRopeTable rope_;  // cos/sin per position, grown when a batch reaches past it
  DeviceBuffer<T> x_final_, xf_;
  DeviceLmLoss<T> loss_;  // the head and cross-entropy, chunked; keeps their gradients
  DeviceBuffer<float> rstdf_;
  DeviceBuffer<double> row_loss_, loss_sum_;
  DeviceBuffer<int64_t> count_;
  // Backward scratch.
  DeviceBuffer<T> u_, du_, dx_, dh_, dxn_, dab_, do_, dqkv_t_;
  DeviceBuffer<float> dqkv_;
};

}  // namespace meshloom::cuda
