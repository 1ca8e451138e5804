// How DeviceRingAttention's blocks travel between the members of a ring: one
// interface, two transports.
//
// A block is a member's K and V rows with their sample ids and positions and,
// in backward, the fp32 dK/dV accumulators that travel with them. Per ring
// step the attention calls:
//   start()    before enqueuing the step's kernels: the current block's K/V
//              may start moving on to the next member, overlapping them;
//   current()  the current block on the device, for those kernels;
//   finish()   after enqueuing them: the rest of the shift (in backward the
//              dK/dV the kernels added to); the previous member's block
//              becomes current for work enqueued on the stream after it.
// Backward's last shift only takes the accumulators home: finish() without
// start(), after which only the current block's dK/dV (and its size) hold.
//
// mpi_ring_link stages blocks through host memory over MPI (comm::RingShift,
// the CPU ring's protocol and tags): right wherever ranks share a GPU.
// nccl_ring_link keeps them on the device (ring_exchange on a communication
// stream of its own): one GPU per member.
#pragma once

#include <mpi.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/device/attention/flash_attention.hpp"
#include "train/backend.hpp"

namespace meshloom::cuda {

// A block on the device: its K/V rows (dense, kv_dim wide) and ids, and its
// dK/dV accumulators (null without them).
template <class T>
struct RingBlock {
  FlashKv<T> kv;
  FlashKvGrad grad;
};

template <class T>
class RingLink {
 public:
  virtual ~RingLink() = default;
  // Makes this member's own block current: `kv`'s rows (strided, on the
  // device; read on `stream`), with zeroed dK/dV when with_grads.
  virtual void load(const FlashKv<T>& kv, int64_t kv_dim, bool with_grads, cudaStream_t stream) = 0;
  // Per step, as described at the top of this file.
  virtual void start(cudaStream_t stream) = 0;
  virtual RingBlock<T> current(cudaStream_t stream) = 0;
  virtual void finish(cudaStream_t stream) = 0;
};

// The ring as DeviceRingAttention is given it: the trainer's RingGroup
// (`members` are ranks of `comm`, and for NCCL of the NCCL communicator, in
// ring order; `me` this rank's index; `max_tokens` bounds every block).
using RingSpec = train::RingGroup;

template <class T>
std::unique_ptr<RingLink<T>> mpi_ring_link(RingSpec ring);
// `nccl`'s ranks are the members' numbers, its device the current one. The
// first load() gathers the members' block sizes around the ring (and waits
// for them), so every member must use this transport for the same ring.
template <class T>
std::unique_ptr<RingLink<T>> nccl_ring_link(RingSpec ring, ncclComm_t nccl);

// Where a block of n rows lies in a device buffer (both transports): K rows,
// V rows, sample ids, positions (the part that travels in forward), then the
// fp32 dK and dV rows at a 256-byte boundary.
struct BlockLayout {
  BlockLayout(int64_t n, int64_t kv_dim, size_t elem_bytes);
  int64_t n, kv_dim;
  size_t rows_bytes, grads_offset, grads_bytes;
  size_t bytes(bool with_grads) const {
    return with_grads ? grads_offset + grads_bytes : rows_bytes;
  }
};

// Copies kv's K/V rows and ids into `dst` (rows_bytes, laid out as above);
// `kind` says whether dst is host or device memory. Asynchronous on `stream`.
template <class T>
void copy_block_rows(const FlashKv<T>& kv, int64_t kv_dim, void* dst, cudaMemcpyKind kind,
                     cudaStream_t stream);
// The block that `base` (device) holds, laid out as above.
template <class T>
RingBlock<T> block_view(char* base, int64_t n, int64_t kv_dim, bool with_grads);

}  // namespace meshloom::cuda
