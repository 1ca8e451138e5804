// One step of a ring: send a buffer to the next member and receive the
// previous member's into another, while the caller computes. Shared by ring
// attention on the CPU (lib/train) and on the GPU (kernels/host/model), which pass
// K/V blocks around a CP group this way.
//
//   RingShift shift(comm, next, prev, tag, out, cap);   // posts both transfers
//   ... compute on the current block ...
//   shift.wait(&in, timeout_s);                          // named failure on a deadline
#pragma once

#include <mpi.h>

#include <cstddef>
#include <vector>

namespace meshloom::comm {

class RingShift {
 public:
  // `out` must stay alive and unchanged until wait() returns; blocks may
  // differ in size between members, so the receive is sized `cap` (at least
  // out.size()).
  RingShift(MPI_Comm comm, int next, int prev, int tag, const std::vector<char>& out, size_t cap);
  RingShift(const RingShift&) = delete;
  RingShift& operator=(const RingShift&) = delete;
  ~RingShift();
  // Waits for both transfers (polling, with back-off); fails naming the two
  // partners after timeout_s. *in gets the received block, sized to it.
  void wait(std::vector<char>* in, double timeout_s);

 private:
  MPI_Comm comm_;  // for the world ranks a timeout names
  int next_, prev_;
  std::vector<char> buffer_;
  MPI_Request reqs_[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
};

}  // namespace meshloom::comm
