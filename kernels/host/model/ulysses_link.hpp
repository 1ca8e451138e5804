// How DeviceUlyssesAttention's rows move between the k members of its group:
// one interface, two transports, chosen as ring attention's are
// (kernels/host/model/ring_link.hpp).
//
// An exchange sends section d of each part (rows [send_at[d], +send_rows[d])
// of `send`) to member d and receives member d's section into rows
// [recv_at[d], +recv_rows[d]) of `recv`; every member's counts agree (member
// d's send_rows[me] == this member's recv_rows[d]). Several parts of
// different row sizes (T rows, fp32 lse) move in one exchange. The same
// rows may go to several members (an all-gather: every send_at 0).
//
// mpi_ulysses_link stages the parts through host memory and runs one
// MPI_Ialltoallv per part on the group's communicator (waited for under the
// deadline): right wherever members share a GPU. nccl_ulysses_link keeps them
// on the device: grouped ncclSend/ncclRecv on the compute stream over a
// communicator of the same members (GroupComms'), this member's own section
// copied on the device.
#pragma once

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace meshloom::cuda {

// One array of an exchange: device rows of row_bytes bytes.
struct UlyssesPart {
  const void* send = nullptr;
  void* recv = nullptr;
  size_t row_bytes = 0;
};

// Rows per member, in member order.
struct UlyssesPlan {
  std::vector<int64_t> send_rows, send_at, recv_rows, recv_at;
};

class UlyssesLink {
 public:
  virtual ~UlyssesLink() = default;
  // Every member's n, in member order (collective; waits on the host).
  virtual std::vector<int64_t> gather_counts(int64_t n, cudaStream_t stream) = 0;
  // The exchange above, in stream order: `recv` is ready for work enqueued
  // on `stream` after it, and `send` may be reused then.
  virtual void exchange(const std::vector<UlyssesPart>& parts, const UlyssesPlan& plan,
                        cudaStream_t stream) = 0;
};

// `group`: exactly the k members, rank = member index.
std::unique_ptr<UlyssesLink> mpi_ulysses_link(MPI_Comm group, double timeout_s);
// `nccl`: the same members with the same ranks as `group`, on the current
// device.
std::unique_ptr<UlyssesLink> nccl_ulysses_link(MPI_Comm group, ncclComm_t nccl, double timeout_s);

}  // namespace meshloom::cuda
