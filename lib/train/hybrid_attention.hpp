// Hybrid context parallelism (USP / LoongTrain's 2D attention): a CP group of
// k = u·r members runs Ulysses inside each of r subgroups of u consecutive
// members (meant for one node's fast links) and a ring across the subgroups.
//
// Member m is member m % u of subgroup m / u. It is UlyssesAttention over the
// subgroup (a split of `group`) whose gathered, head-sharded blocks run
// RingAttention instead of local attention: after the subgroup's all-to-all,
// member m holds its subgroup's tokens for the query heads [(m % u)·H/u, ...),
// and the r members with the same m % u — the same heads, the other
// subgroups' tokens — pass those K/V blocks around a ring. So u rings run side
// by side, point-to-point on `group` with RingAttention's tags (each ring's
// members are distinct, so they cannot mix up). Backward sends delta, not O,
// through both (RingAttention's backward from delta).
//
// Heads: u must divide this TP rank's query heads (Ulysses' rule for k = u,
// ulysses_attention.hpp, KV heads included); r is free.
//
// Tokens: any split, as for Ulysses; with the zigzag layout over all k
// members (plan.hpp) every subgroup, so every ring block, holds the same
// causal work.
#pragma once

#include <mpi.h>

#include <memory>

#include "train/ulysses_attention.hpp"

namespace meshloom::train {

// Bytes one member sends per token it holds, per layer, with equal shares:
// the all-to-all part stays inside a subgroup, the ring part crosses them.
//   all_to_all = ulysses_bytes_per_token(dims, u, e)
//   ring.forward  = (r-1) · u · (2v·D·e + 8)     (K, V, ids of u members' tokens)
//   ring.backward =   r   · u · (4v·D·e + 8)     (the same with dK, dV)
// with v = ulysses_heads(dims, u).v, plus one 8-byte header per block and shift.
struct HybridBytes {
  CpBytes all_to_all;
  CpBytes ring;
};
HybridBytes hybrid_bytes_per_token(const model::AttnDims& dims, int u, int r, size_t elem_bytes);

// How the trainer builds it for a micro-batch whose group has k = u·r members:
//   MPI_Comm group = ...;  // exactly the k members, rank = member index
//   train::HybridAttention attn(group, member, u, max_tokens, attn_options, run.timeout);
//   model.forward(batch, &attn);  // batch: this member's zigzag chunks
// Construction is collective over `group` (it splits the subgroups'
// communicator, freed with the object), so build one per group and keep it
// while the group lives; or pass `subgroup`, this member's subgroup already
// split (the trainer's: MpiGroupComms prepares the step's subgroups with its
// CP groups, once per member set), and construction is local. `max_tokens`: the most tokens any
// member holds in a micro-batch (RingGroup::max_tokens); the ring's blocks hold up to u times that.
class HybridAttention final : public model::AttentionBackend<float> {
 public:
  HybridAttention(MPI_Comm group, int me, int u, int64_t max_tokens, const model::AttnOptions& opt,
                  double timeout_s, MPI_Comm subgroup = MPI_COMM_NULL);
  ~HybridAttention() override;
  HybridAttention(const HybridAttention&) = delete;
  HybridAttention& operator=(const HybridAttention&) = delete;

  void forward(int layer, const model::AttnDims& dims, const model::QueryBlock<float>& q,
               const model::KvBlock<float>& kv, const model::AttnOut<float>& res) override;
  void backward(int layer, const model::AttnDims& dims, const model::QueryBlock<float>& q,
                const model::KvBlock<float>& kv, const float* out, int64_t ldo, const float* lse,
                const float* dout, int64_t lddo, float* dq, int64_t lddq,
                const model::KvGrad<float>& kv_grad) override;

  // Bytes this member sent so far: inside its subgroup, and around its ring.
  double all_to_all_bytes_sent() const { return ulysses_->bytes_sent(); }
  double ring_bytes_sent() const;

 private:
  MPI_Comm subgroup_ = MPI_COMM_NULL;
  bool own_subgroup_ = false;  // split here, so freed here
  class Ring;
  Ring* ring_ = nullptr;  // owned by ulysses_
  std::unique_ptr<UlyssesAttention<float>> ulysses_;
};

}  // namespace meshloom::train
