#include "comm/ring_shift.hpp"

#include <algorithm>
#include <chrono>

#include "base/check.hpp"
#include "base/strings.hpp"
#include "comm/mpi_check.hpp"
#include "comm/mpi_util.hpp"
#include "comm/p2p.hpp"

namespace meshloom::comm {

RingShift::RingShift(MPI_Comm comm, int next, int prev, int tag, const std::vector<char>& out,
                     size_t cap)
    : comm_(comm), next_(next), prev_(prev), buffer_(std::max(cap, out.size())) {
  MPI_CHECK(MPI_Irecv(buffer_.data(), int(buffer_.size()), MPI_BYTE, prev, tag, comm, &reqs_[0]));
  MPI_CHECK(MPI_Isend(out.data(), int(out.size()), MPI_BYTE, next, tag, comm, &reqs_[1]));
}

RingShift::~RingShift() {
  // Only reached without wait() when the step failed and the job is ending:
  // leave the requests to MPI rather than block here.
}

void RingShift::wait(std::vector<char>* in, double timeout_s) {
  const auto start = std::chrono::steady_clock::now();
  int idle = 0;
  MPI_Status statuses[2];
  while (true) {
    int done = 0;
    MPI_CHECK(MPI_Testall(2, reqs_, &done, statuses));
    if (done) break;
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited > timeout_s) {
      const std::vector<int> world = world_ranks(comm_, {prev_, next_});
      ML_TIMEOUT(
          prev_ == next_
              ? strf("ring attention: waited %.0f s for world rank %d, the other member of the "
                     "ring: dead, hung or far behind (run.timeout sets this limit)",
                     waited, world[0])
              : strf("ring attention: waited %.0f s for world rank %d (previous in the ring) or "
                     "%d (next): dead, hung or far behind (run.timeout sets this limit)",
                     waited, world[0], world[1]));
    }
    backoff(&idle);
  }
  int count = 0;
  MPI_CHECK(MPI_Get_count(&statuses[0], MPI_BYTE, &count));
  buffer_.resize(size_t(count));
  *in = std::move(buffer_);
}

}  // namespace meshloom::comm
