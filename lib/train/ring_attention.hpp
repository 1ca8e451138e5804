// Ring attention (context parallelism) across the members of one CP group.
//
// Each member holds its own zigzag chunks of the group's sequences (queries,
// keys and values with their global positions and sample ids). Forward: the
// members' K/V blocks travel around the ring, each member merges its queries'
// attention over every block with the online-softmax merge; the receive of the
// next block overlaps the compute on the current one (MPI_Isend/Irecv, double
// buffered). Backward: blocks travel again together with their dK/dV
// accumulators, each member adds its queries' share; after a full turn every
// accumulator goes home.
//
// All messages run on the trainers' communicator, point-to-point: no
// communicator is created per group (creating them is slow and, on GPUs,
// costs memory). Members process their ring micro-batches in the plan's one
// global order, so a fixed tag per direction cannot mix two rings up.
#pragma once

#include <mpi.h>

#include <vector>

#include "model/attention.hpp"

namespace meshloom::train {

class RingAttention final : public model::AttentionBackend<float> {
 public:
  // `group` lists the members' ranks in `comm` in ring order; `me` is this
  // rank's index in it. `max_tokens` bounds any member's block (C or more: RingGroup).
  RingAttention(MPI_Comm comm, std::vector<int> group, int me, int64_t max_tokens,
                const model::AttnOptions& opt, double timeout_s);

  void forward(int layer, const model::AttnDims& dims, const model::QueryBlock<float>& q,
               const model::KvBlock<float>& kv, const model::AttnOut<float>& res) override;
  void backward(int layer, const model::AttnDims& dims, const model::QueryBlock<float>& q,
                const model::KvBlock<float>& kv, const float* out, int64_t ldo, const float* lse,
                const float* dout, int64_t lddo, float* dq, int64_t lddq,
                const model::KvGrad<float>& kv_grad) override;
  // backward() once delta = rowsum(dO ⊙ O) is known (g.delta): for callers
  // that have delta but not O (HybridAttention's head-sharded blocks).
  void backward(const model::AttnDims& dims, const model::QueryBlock<float>& q,
                const model::KvBlock<float>& kv, const model::QueryGrad<float>& g,
                const model::KvGrad<float>& kv_grad);

  // Bytes this member sent so far (for reports).
  double bytes_sent() const { return bytes_sent_; }

 private:
  // A block as it travels: K and V rows (contiguous, kv_dim wide), then sample
  // and position ids, then (backward only) dK and dV rows.
  struct Block {
    std::vector<char> bytes;
    int64_t n = 0;
  };
  void pack(const model::KvBlock<float>& kv, int64_t kv_dim, bool with_grads, Block* b) const;
  model::KvBlock<float> view(const Block& b, int64_t kv_dim) const;
  model::KvGrad<float> grad_view(Block& b, int64_t kv_dim) const;
  // Sends `out` to the next member and receives the previous one's block into
  // `in`, while `compute` runs.
  template <class F>
  void shift(const Block& out, Block* in, int tag, size_t cap, F&& compute);

  MPI_Comm comm_;
  std::vector<int> group_;
  int me_;
  int64_t max_tokens_;
  model::AttnOptions opt_;
  double timeout_s_;
  double bytes_sent_ = 0;
};

}  // namespace meshloom::train
