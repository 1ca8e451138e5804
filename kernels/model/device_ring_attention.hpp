// Ring attention (context parallelism) on the GPU: the twin of
// train::RingAttention (lib/train/ring_attention.hpp), same protocol, same
// messages, same order, so the plan's global order of ring micro-batches
// keeps the rings apart here too.
//
// Forward: the members' K/V blocks travel around the ring; each member runs
// the flash kernels over every block into an fp32 accumulator (out, lse) and
// merges them (online softmax), then writes out in T. Backward: blocks travel
// again with their fp32 dK/dV accumulators; after a full turn every
// accumulator comes home and is added into the member's dK/dV.
//
// Blocks are staged through host memory and sent over MPI (comm::RingShift):
// correct everywhere, including several trainers sharing one GPU, but not
// fast; NCCL send/receive between GPUs (kernels/comm) is the fast path to
// come. Transfers overlap the kernels of the current block.
#pragma once

#include <mpi.h>

#include <vector>

#include "kernels/common/device_buffer.hpp"
#include "kernels/model/device_attention.hpp"

namespace meshloom::kernels {

template <class T>
class DeviceRingAttention final : public DeviceAttention<T> {
 public:
  // `members` lists the ranks in `comm` in ring order; `me` is this rank's
  // index in it. `max_tokens` bounds any member's block (the capacity).
  DeviceRingAttention(MPI_Comm comm, std::vector<int> members, int me, int64_t max_tokens,
                      double timeout_s);

  void forward(int layer, const FlashDims& dims, const FlashQuery<T>& q, const FlashKv<T>& kv,
               const FlashOut<T>& res, cudaStream_t stream) override;
  void backward(int layer, const FlashDims& dims, const FlashQuery<T>& q, const FlashKv<T>& kv,
                const T* out, int64_t ldo, const float* lse, const T* dout, int64_t lddo, float* dq,
                int64_t lddq, const FlashKvGrad& kv_grad, cudaStream_t stream) override;

 private:
  // A block as it travels (host bytes): n, K rows, V rows (kv_dim wide, type
  // T), sample ids, positions, then (backward only) fp32 dK and dV rows.
  struct Block {
    std::vector<char> bytes;
    int64_t n = 0;
  };
  static size_t block_bytes(int64_t n, int64_t kv_dim, bool with_grads);
  void pack(const FlashKv<T>& kv, int64_t kv_dim, bool with_grads, Block* b,
            cudaStream_t stream) const;
  // Copies a block to the device buffers; returns the K/V view of them.
  FlashKv<T> upload(const Block& b, int64_t kv_dim, bool with_grads, cudaStream_t stream);
  void shift(const Block& out, Block* in, int tag, size_t cap);

  MPI_Comm comm_;
  std::vector<int> members_;
  int me_;
  int64_t max_tokens_;
  double timeout_s_;
  DeviceBuffer<T> k_, v_;
  DeviceBuffer<int32_t> ids_;
  DeviceBuffer<float> dkv_, acc_, part_, part_lse_, delta_;
};

}  // namespace meshloom::kernels
