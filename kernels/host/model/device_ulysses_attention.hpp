// Ulysses and hybrid context parallelism on the GPU: the twins of
// train::UlyssesAttention and train::HybridAttention
// (lib/train/ulysses_attention.hpp, hybrid_attention.hpp), same cut of the
// heads, same messages in the same order, so they give the CPU's numbers.
//
// Ulysses over the k members of a group, per layer:
//   forward:  all-to-all from this member's tokens with every head to the
//             group's tokens with H/k query heads (and the KV heads those
//             use, the CPU's rule: model::UlyssesHeads), the flash kernels
//             over all of them (masked by the gathered sample ids and
//             positions: any split of the tokens works), all-to-all of O and
//             lse back to the token owners;
//   backward: the owners compute delta from O and dO and send Q, K, V, dO,
//             lse, delta head-sharded (nothing is kept from forward); dQ, dK,
//             dV (fp32) come back and each owner adds them up in member
//             order, then local KV head order.
// The group's token counts and ids are gathered once, at the first forward:
// one object serves one micro-batch, as DeviceRingAttention does.
//
// Hybrid (k = u·r): Ulysses inside this member's subgroup of u, whose
// gathered blocks run a DeviceRingAttention across the r subgroups (the
// members at the same place in every subgroup) instead of local attention.
//
// Transport (kernels/host/model/ulysses_link.hpp): NCCL on a communicator of the
// same members (GroupComms'), else MPI through host memory.
//
// With AttentionImpl::cudnn (bf16) the gathered blocks' forward runs on
// cuDNN (CudnnBlockAttention: packed documents when positions restart at 0
// per sample, else the planned passes), hybrid's ring steps too
// (DeviceRingAttention); backward stays on the flash kernels, as O does not
// travel and cuDNN's backward graph needs it. Where cuDNN cannot take the
// blocks, the flash kernels run.
#pragma once

#include <mpi.h>
#include <nccl.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/host/device_buffer.hpp"
#include "kernels/host/model/attention_choice.hpp"
#include "kernels/host/model/device_attention.hpp"
#include "kernels/host/model/ulysses_link.hpp"
#include "model/ulysses_heads.hpp"

namespace meshloom::cuda {

// The CPU's cut of the heads over k members (model/ulysses_heads.hpp) for
// these dims; one clear error when k does not divide the query heads.
model::UlyssesHeads device_ulysses_heads(const FlashDims& dims, int k);

// The attention on the gathered, head-sharded blocks. Backward takes delta
// (the token owners computed it: O does not travel).
template <class T>
class GatheredDeviceAttention {
 public:
  virtual ~GatheredDeviceAttention() = default;
  virtual void forward(int layer, const FlashDims& dims, const FlashQuery<T>& q,
                       const FlashKv<T>& kv, const FlashOut<T>& res, cudaStream_t stream) = 0;
  virtual void backward(int layer, const FlashDims& dims, const FlashQuery<T>& q,
                        const FlashKv<T>& kv, const FlashQueryGrad<T>& g,
                        const FlashKvGrad& kv_grad, cudaStream_t stream) = 0;
  // cuDNN graph calls so far (tests check that cuDNN ran).
  virtual int64_t cudnn_passes() const { return 0; }
};

template <class T>
class DeviceUlyssesAttention final : public DeviceAttention<T> {
 public:
  // `group`: exactly the k members, rank = member index. `nccl`: the same
  // members with the same ranks (null: MPI through host memory). `inner`
  // runs on the gathered blocks (null: the flash kernels, or cuDNN's
  // forward where `impl` says so).
  DeviceUlyssesAttention(MPI_Comm group, double timeout_s, ncclComm_t nccl = nullptr,
                         std::unique_ptr<GatheredDeviceAttention<T>> inner = nullptr,
                         AttentionImpl impl = attention_for<T>());

  void forward(int layer, const FlashDims& dims, const FlashQuery<T>& q, const FlashKv<T>& kv,
               const FlashOut<T>& res, cudaStream_t stream) override;
  void backward(int layer, const FlashDims& dims, const FlashQuery<T>& q, const FlashKv<T>& kv,
                const T* out, int64_t ldo, const float* lse, const T* dout, int64_t lddo, float* dq,
                int64_t lddq, const FlashKvGrad& kv_grad, cudaStream_t stream) override;
  int64_t cudnn_passes() const { return inner_->cudnn_passes(); }

 private:
  // The group's counts and ids, once per object.
  void gather_tokens(const FlashQuery<T>& q, const FlashKv<T>& kv, cudaStream_t stream);
  // Section d (n rows, `width` wide): Q of member d's query heads, then K and
  // V of its local KV heads.
  void pack_qkv(const model::UlyssesHeads& h, int64_t D, const FlashQuery<T>& q,
                const FlashKv<T>& kv, int64_t width, cudaStream_t stream);
  // The all-to-all out (this member's k sections to every member's rows)
  // and back.
  UlyssesPlan plan(bool back) const;

  int k_ = 1, me_ = 0;
  std::unique_ptr<UlyssesLink> link_;
  std::unique_ptr<GatheredDeviceAttention<T>> inner_;
  int64_t n_ = -1, total_ = 0;          // this member's tokens, the group's
  std::vector<int64_t> count_, at_;     // every member's tokens and first row
  DeviceBuffer<int32_t> sample_, pos_;  // the group's ids, member order
  DeviceBuffer<T> send_, sharded_, result_, back_;
  DeviceBuffer<float> lse_, back_lse_, delta_, fsend_, glse_, gdelta_, grads_, back_grads_;
};

// Hybrid attention of the members of `group` (k, rank = member index) in
// subgroups of u consecutive ranks; `subgroup` is this member's. `max_tokens`
// bounds any member's tokens (RingGroup::max_tokens). `group_nccl` and
// `sub_nccl`: the same members with the same ranks (both null: MPI).
template <class T>
std::unique_ptr<DeviceAttention<T>> device_hybrid_attention(
    MPI_Comm group, MPI_Comm subgroup, int u, int64_t max_tokens, double timeout_s,
    ncclComm_t group_nccl = nullptr, ncclComm_t sub_nccl = nullptr,
    AttentionImpl impl = attention_for<T>());

}  // namespace meshloom::cuda
