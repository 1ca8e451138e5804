// The LM head and its softmax cross-entropy on the GPU, fused and computed a
// chunk of tokens at a time: the twin of model::LmLoss (lib/model/lm_loss.hpp),
// the same algorithm in the same order. Logits exist for at most
// chunk × rows at once (rows = V/tp, this TP rank's vocabulary shard), never
// for the whole micro-batch: at 16K tokens and GPT-2's vocabulary the whole
// [n, V] buffer is 1.6 GB in bf16, a chunk of 1024 tokens 100 MB (÷ tp).
//
//   DeviceLmLoss<T> loss(1024, blas, stream);
//   loss.forward(xf, n, head, targets, tp, row_loss);   // tp: null at tp = 1
//   loss.backward(scale, dxf, dhead);                    // dxf = scale·∂/∂xf
//
// Per chunk of m tokens (kernels: kernels/device/ops/lm_loss.hpp):
//   z = xf_chunk·headᵀ                       [m, rows] (cuBLAS)
//   per token: the shard's max and the target logit     → max over the group
//   per token: the shard's Σ exp(z − max)               → sum over the group
//   z = softmax − onehot, row losses
//   d(xf)_chunk = z·head;  d(head) += zᵀ·xf_chunk       (cuBLAS)
// Like the CPU, forward leaves both gradients of the loss sum, unscaled
// (the scale, 1/global predictions, comes with backward): d(xf) [n, d] in T,
// d(head) [rows, d] in fp32; backward only scales them into the model's
// buffers. With TP each shard's d(head) is complete and its d(xf) a partial
// sum over its rows, which the model sums over the group.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/device/ops/lm_loss.hpp"
#include "kernels/host/blas/gemm.hpp"
#include "kernels/host/device_buffer.hpp"
#include "kernels/host/model/device_tp_comm.hpp"

namespace meshloom::cuda {

// Vocabulary rows [vocab.first, vocab.first + vocab.rows) of the head matrix,
// row-major [rows, d], on the device.
template <class T>
struct DeviceHead {
  const T* weight = nullptr;
  VocabRows vocab;
  int64_t d = 0;
};

template <class T>
class DeviceLmLoss {
 public:
  // `blas` (bound to `stream`) must outlive the loss.
  DeviceLmLoss(int64_t chunk, Blas& blas, cudaStream_t stream);

  int64_t chunk() const { return chunk_; }

  // row_loss[i] = −log p(targets[i]) (0 where the target is −1) for the n
  // tokens whose final states are xf [n, head.d]; keeps the unscaled
  // gradients for backward(). targets and row_loss on the device. `tp`
  // combines the shards' statistics (null: the head is the whole head).
  void forward(const T* xf, int64_t n, const DeviceHead<T>& head, const int32_t* targets,
               DeviceTpComm<T>* tp, double* row_loss);
  // dxf = scale·∂(loss sum)/∂xf ([n, d], overwritten; this shard's part) and
  // dhead += scale·∂(loss sum)/∂head ([rows, d], fp32) of the last forward().
  void backward(float scale, T* dxf, float* dhead);

 private:
  void reserve(int64_t n, int64_t rows, int64_t d);
  void chunk_forward(const T* xf, int64_t t0, int64_t m, const DeviceHead<T>& head,
                     const int32_t* targets, DeviceTpComm<T>* tp, double* row_loss);
  void softmax_minus_onehot(int64_t m, const DeviceHead<T>& head, const int32_t* targets,
                            DeviceTpComm<T>* tp, double* row_loss);

  int64_t chunk_;
  Blas& blas_;
  cudaStream_t stream_;
  int64_t n_ = 0, rows_ = 0, d_ = 0;
  bool have_forward_ = false;
  DeviceBuffer<T> logits_;      // [min(n, chunk), rows]: a chunk's, then its softmax − onehot
  DeviceBuffer<double> stats_;  // per token of the chunk: max, then Σ exp and the target logit
  DeviceBuffer<T> dxf_;         // unscaled gradients of the loss sum
  DeviceBuffer<float> dhead_;
};

}  // namespace meshloom::cuda
