// cuDNN's fused attention for a query block against a key block whose mask
// is not one set of packed documents: a context-parallel ring step (local
// zigzag chunks × a visiting K/V block) or Ulysses' gathered tokens. The
// block's sample ids and positions are read back to the host and planned as
// cuDNN passes (kernels/host/cudnn/sdpa_block_documents.hpp); each pass is one
// graph call, causal or not.
//
// Forward merges every pass's (O, lse) into the caller's fp32 accumulator
// through lse, as the ring merges its steps. Backward runs each pass's
// graph with the FINAL O and lse (as the flash kernels take the final lse),
// so each pass's dQ, dK, dV are its exact share; they are added to the
// caller's fp32 accumulators.
//
// Where a block cannot be planned (too many passes), a pass's shape is
// outside the graphs, or no engine takes it, the call returns false having
// done nothing, and the caller runs the flash kernels (logged once per
// reason). bf16 only. Compiled here; never run on a GPU yet.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kernels/device/attention/flash_attention.hpp"
#include "kernels/host/cudnn/sdpa_block_documents.hpp"
#include "kernels/host/cudnn/sdpa_documents.hpp"
#include "kernels/host/cudnn/sdpa_plan.hpp"
#include "kernels/host/device_buffer.hpp"
#include "kernels/host/model/cudnn_session.hpp"

namespace meshloom::cuda {

class CudnnBlockAttention {
 public:
  using T = __nv_bfloat16;
  using Passes = std::vector<cudnn::SdpaPass>;
  CudnnBlockAttention() = default;

  // The passes of q against kv (a synchronizing read of their ids), or
  // nullopt where they cannot be planned or head_dim is not 64 or 128.
  std::optional<Passes> plan(const FlashDims& dims, const FlashQuery<T>& q, const FlashKv<T>& kv,
                             cudaStream_t stream);

  // acc ← merge of acc and q's attention over kv. False: nothing ran.
  bool forward(const FlashDims& dims, const FlashQuery<T>& q, const FlashKv<T>& kv,
               const Passes& passes, const FlashOut<float>& acc, cudaStream_t stream);
  // dq, kv_grad += the gradients of q's attention over kv, given the final
  // out and lse. False: nothing ran.
  bool backward(const FlashDims& dims, const FlashQuery<T>& q, const FlashKv<T>& kv,
                const Passes& passes, const T* out, int64_t ldo, const float* lse, const T* dout,
                int64_t lddo, float* dq, int64_t lddq, const FlashKvGrad& kv_grad,
                cudaStream_t stream);

  // An empty accumulator for n rows: out 0, lse a huge negative number that
  // every merge weighs as nothing (kEmptyLseByte in the .cpp).
  static void clear(const FlashDims& dims, int64_t n, const FlashOut<float>& acc,
                    cudaStream_t stream);

  // forward / backward over block `step` of a ring (or 0: Ulysses' one
  // block), planned at the first call of that step: a ring's blocks keep
  // their tokens over every layer of a micro-batch.
  bool forward_step(int step, const FlashDims& dims, const FlashQuery<T>& q, const FlashKv<T>& kv,
                    const FlashOut<float>& acc, cudaStream_t stream);
  bool backward_step(int step, const FlashDims& dims, const FlashQuery<T>& q, const FlashKv<T>& kv,
                     const T* out, int64_t ldo, const float* lse, const T* dout, int64_t lddo,
                     float* dq, int64_t lddq, const FlashKvGrad& kv_grad, cudaStream_t stream);

  int64_t cudnn_passes() const { return cudnn_passes_; }
  int64_t fallbacks() const { return fallbacks_; }

 private:
  // Every pass's plan, or empty (logged) where one is refused: nothing runs
  // unless all of them can.
  std::vector<const cudnn::SdpaPlan*> plans_for(const FlashDims& dims, const Passes& passes,
                                                const std::vector<int64_t>& lds, bool backward);
  // Uploads query and key lengths, then one ragged-offset table per
  // (key side?, leading dimension); returns their device pointers in that
  // order.
  struct Table {
    bool kv_side = false;
    int64_t ld = 0;
  };
  std::vector<int32_t*> upload_tables(const cudnn::SdpaPass& pass, int64_t bucket, int64_t nq,
                                      int64_t nkv, const std::vector<Table>& tables,
                                      cudaStream_t stream);
  // The cached passes of a step (replanned if its block's size changed);
  // null: the flash kernels.
  const Passes* step_passes(int step, const FlashDims& dims, const FlashQuery<T>& q,
                            const FlashKv<T>& kv, cudaStream_t stream);
  void fall_back(const std::string& why);

  CudnnSession session_;
  DeviceBuffer<T> part_, dq_, dk_, dv_;
  DeviceBuffer<float> part_f_, part_lse_;
  std::vector<int32_t> q_sample_, q_pos_, kv_sample_, kv_pos_;
  struct StepPlan {
    int64_t kv_n = -1;
    std::optional<Passes> passes;
  };
  std::map<int, StepPlan> steps_;
  int64_t cudnn_passes_ = 0, fallbacks_ = 0;
};

}  // namespace meshloom::cuda
