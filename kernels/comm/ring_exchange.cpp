#include "kernels/comm/ring_exchange.hpp"

#include <string>

#include "base/check.hpp"
#include "kernels/comm/member_sets.hpp"
#include "kernels/common/check.cuh"

namespace meshloom::kernels {

void ring_exchange(ncclComm_t comm, std::span<const int> members, int me, const void* send,
                   size_t send_bytes, void* recv, size_t recv_bytes, cudaStream_t stream) {
  const RingPeers peers = ring_peers(members, me);
  int self = -1;
  NCCL_CHECK(ncclCommUserRank(comm, &self));
  ML_CHECK(members[size_t(me)] == self, "ring member " + std::to_string(me) + " is rank " +
                                            std::to_string(members[size_t(me)]) +
                                            ", not this rank " + std::to_string(self));
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

}  // namespace meshloom::kernels
