// Ring attention (context parallelism) on the GPU: the twin of
// train::RingAttention (lib/train/ring_attention.hpp), same protocol, same
// order, so the plan's global order of ring micro-batches keeps the rings
// apart here too.
//
// Forward: the members' K/V blocks travel around the ring; each member runs
// the flash kernels over every block into an fp32 accumulator (out, lse) and
// merges them (online softmax), then writes out in T. Backward: blocks travel
// again with their fp32 dK/dV accumulators; after a full turn every
// accumulator comes home and is added into the member's dK/dV.
//
// Two transports (kernels/host/model/ring_link.hpp), the same kernels in the same
// order, so the same results: without an NCCL communicator blocks are staged
// through host memory over MPI (the CPU ring's messages; right when trainers
// share a GPU); with one they stay on the device and move with NCCL
// send/receive on a communication stream (one GPU per trainer). Either way
// the next block travels while the kernels run on the current one.
//
// With AttentionImpl::cudnn (bf16 only) each step runs cuDNN's fused
// attention on the step's section of the mask (CudnnBlockAttention: causal
// diagonal documents, fully visible earlier ones, nothing), merged through
// lse like the flash steps; a step cuDNN cannot take runs the flash kernels.
// backward_from_delta (hybrid: O is not here) always runs the flash kernels.
#pragma once

#include <mpi.h>
#include <nccl.h>

#include <memory>
#include <vector>

#include "kernels/host/device_buffer.hpp"
#include "kernels/host/model/attention_choice.hpp"
#include "kernels/host/model/device_attention.hpp"
#include "kernels/host/model/ring_link.hpp"

namespace meshloom::cuda {

#ifdef MESHLOOM_HAVE_CUDNN
class CudnnBlockAttention;  // cudnn_block_attention.hpp
#else
class CudnnBlockAttention {};  // never made without cuDNN
#endif

template <class T>
class DeviceRingAttention final : public DeviceAttention<T> {
 public:
  // `members` lists the ranks in `comm` in ring order; `me` is this rank's
  // index in it. `max_tokens` bounds any member's block (C or more: RingGroup). With
  // `nccl` the blocks move over it instead: the same numbers are its ranks
  // (NCCL rank == MPI rank == trainer index), members[me] must be this rank,
  // and its device the current one. Lives for one micro-batch: its blocks
  // keep their sizes over every layer (NCCL exchanges them at the first
  // forward). `impl`: cuDNN or the flash kernels per step (cuDNN only for
  // bf16 where it is built in; else flash).
  DeviceRingAttention(MPI_Comm comm, std::vector<int> members, int me, int64_t max_tokens,
                      double timeout_s, ncclComm_t nccl = nullptr,
                      AttentionImpl impl = attention_for<T>());
  ~DeviceRingAttention() override;

  void forward(int layer, const FlashDims& dims, const FlashQuery<T>& q, const FlashKv<T>& kv,
               const FlashOut<T>& res, cudaStream_t stream) override;
  void backward(int layer, const FlashDims& dims, const FlashQuery<T>& q, const FlashKv<T>& kv,
                const T* out, int64_t ldo, const float* lse, const T* dout, int64_t lddo, float* dq,
                int64_t lddq, const FlashKvGrad& kv_grad, cudaStream_t stream) override;
  // backward() once delta is known (g.delta): what hybrid attention runs on
  // its gathered blocks, whose delta the token owners computed.
  void backward_from_delta(const FlashDims& dims, const FlashQuery<T>& q, const FlashKv<T>& kv,
                           const FlashQueryGrad<T>& g, const FlashKvGrad& kv_grad,
                           cudaStream_t stream);
  // cuDNN graph calls so far (0 with the flash kernels): tests check that
  // cuDNN ran rather than fell back.
  int64_t cudnn_passes() const;

 private:
  // The steps of backward; `out` null: the flash kernels throughout.
  void backward_steps(const FlashDims& dims, const FlashQuery<T>& q, const FlashKv<T>& kv,
                      const FlashQueryGrad<T>& g, const T* out, int64_t ldo,
                      const FlashKvGrad& kv_grad, cudaStream_t stream);
  // One step on cuDNN; false where it did not run.
  bool cudnn_forward(int step, const FlashDims& dims, const FlashQuery<T>& q,
                     const FlashKv<T>& block, const FlashOut<float>& acc, cudaStream_t stream);
  bool cudnn_backward(int step, const FlashDims& dims, const FlashQuery<T>& q,
                      const FlashKv<T>& block, const FlashQueryGrad<T>& g, const T* out,
                      int64_t ldo, const FlashKvGrad& grad, cudaStream_t stream);

  int k_;
  std::unique_ptr<CudnnBlockAttention> cudnn_;  // null: the flash kernels
  std::unique_ptr<RingLink<T>> link_;
  DeviceBuffer<float> acc_, part_, part_lse_, delta_;
};

}  // namespace meshloom::cuda
