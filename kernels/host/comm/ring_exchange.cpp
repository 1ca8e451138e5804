#include "kernels/host/comm/ring_exchange.hpp"

#include <string>

#include "base/check.hpp"
#include "comm/member_sets.hpp"
#include "kernels/device/common/check.cuh"

namespace meshloom::cuda {

namespace {

// The neighbours of members[me], which must be this rank of `comm`.
comm::RingPeers this_members_peers(ncclComm_t comm, std::span<const int> members, int me) {
  const comm::RingPeers peers = comm::ring_peers(members, me);
  int self = -1;
  NCCL_CHECK(ncclCommUserRank(comm, &self));
  ML_CHECK(members[size_t(me)] == self, "ring member " + std::to_string(me) + " is rank " +
                                            std::to_string(members[size_t(me)]) +
                                            ", not this rank " + std::to_string(self));
  return peers;
}

}  // namespace

void ring_exchange(ncclComm_t comm, std::span<const int> members, int me, const void* send,
                   size_t send_bytes, void* recv, size_t recv_bytes, cudaStream_t stream) {
  const comm::RingPeers peers = this_members_peers(comm, members, me);
  if (members.size() == 1) {
    ML_CHECK(send_bytes == recv_bytes, "a ring of one receives what it sends");
    if (send_bytes > 0)
      CUDA_CHECK(cudaMemcpyAsync(recv, send, send_bytes, cudaMemcpyDeviceToDevice, stream));
    return;
  }
  // Both transfers in one group: each member sends and receives at once, so
  // no ordering of blocking calls can deadlock the ring.
  NCCL_CHECK(ncclGroupStart());
  if (send_bytes > 0) NCCL_CHECK(ncclSend(send, send_bytes, ncclUint8, peers.next, comm, stream));
  if (recv_bytes > 0) NCCL_CHECK(ncclRecv(recv, recv_bytes, ncclUint8, peers.prev, comm, stream));
  NCCL_CHECK(ncclGroupEnd());
}

void ring_all_gather(ncclComm_t comm, std::span<const int> members, int me, void* all, size_t bytes,
                     cudaStream_t stream) {
  this_members_peers(comm, members, me);
  const int k = int(members.size());
  char* entry = static_cast<char*>(all);
  // Step t passes on member (me - t)'s entry and receives member (me - t - 1)'s;
  // each step reads what the one before received, in stream order.
  for (int t = 0; t + 1 < k; ++t) {
    const size_t out = size_t((me - t + k) % k), in = size_t((me - t - 1 + k) % k);
    ring_exchange(comm, members, me, entry + out * bytes, bytes, entry + in * bytes, bytes, stream);
  }
}

}  // namespace meshloom::cuda
