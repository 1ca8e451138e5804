// One step of a ring over NCCL: send a device buffer to the next member of a
// group and receive the previous member's, in one ncclGroupStart/End on a
// stream. The device twin of comm::RingShift (lib/comm/ring_shift.hpp), for
// ring attention's K/V blocks and travelling dK/dV accumulators between GPUs.
//
// Point-to-point needs no group communicator: it runs on the trainers'
// communicator with trainer indices, so no split (and no collective call) is
// needed per ring. Unlike MPI, NCCL carries no message size: the receiver
// must know what the previous member sends (ring attention gathers every
// member's block size once with ring_all_gather; or blocks can be sent at a
// fixed capacity).
//
//   ring_exchange(trainers.get(), members, me, out, out_bytes, in, in_bytes, stream);
//   ... kernels on other streams overlap; wait on `stream` before using `in`.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstddef>
#include <span>

namespace meshloom::cuda {

// `members`: the ring, as ranks of `comm` in ring order; `me`: this rank's
// index in it (members[me] must be this rank). Sends send_bytes from `send`
// to members[me+1] and receives recv_bytes into `recv` from members[me-1]
// (recv_bytes must equal that member's send_bytes). The buffers must not
// overlap. A ring of one copies `send` into `recv` on the stream. Zero bytes
// move nothing (the partner then passes zero too).
void ring_exchange(ncclComm_t comm, std::span<const int> members, int me, const void* send,
                   size_t send_bytes, void* recv, size_t recv_bytes, cudaStream_t stream);

// Every member's entry of `bytes` bytes to every member, around the ring:
// `all` (device) holds one entry per member in ring order, this member's at
// index me on entry, all of them once `stream` gets there. k - 1 ring
// exchanges, so only ring neighbours talk (no connections to the others):
// for the few bytes that members must know of each other before exchanging
// blocks, such as the blocks' sizes.
void ring_all_gather(ncclComm_t comm, std::span<const int> members, int me, void* all, size_t bytes,
                     cudaStream_t stream);

}  // namespace meshloom::cuda
