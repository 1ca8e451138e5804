// Point-to-point messages of bytes with a deadline (and the deadline wait
// of any non-blocking call).
//
// Every wait polls (MPI_Iprobe / MPI_Test) with a short back-off instead of
// blocking, for two reasons: a rank that never answers must produce a clear
// error naming who waited for whom and for what (never a silent hang), and
// ranks oversubscribed on few cores must not spin each other out of the CPU.
#pragma once

#include <mpi.h>

#include <functional>
#include <memory>
#include <string>

namespace meshloom::comm {

// Sends `bytes` to `dest` (blocking until the buffer may be reused).
void send_bytes(const std::string& bytes, int dest, int tag, MPI_Comm comm);

// A non-blocking send whose buffer this object keeps alive until complete.
class PendingSend {
 public:
  PendingSend(std::string bytes, int dest, int tag, MPI_Comm comm);
  PendingSend(PendingSend&&) noexcept;
  PendingSend(const PendingSend&) = delete;
  ~PendingSend();
  bool done();
  // Gives up on a send whose peer may be dead: MPI completes or drops it on
  // its own. A completed send's buffer is freed; an incomplete one's is kept,
  // reachable, until the process ends (it must outlive the send).
  void abandon();

 private:
  std::unique_ptr<std::string> bytes_;
  MPI_Request request_ = MPI_REQUEST_NULL;
};

// Receives one message with `tag` from `source` (or MPI_ANY_SOURCE); *from
// gets the sender. Fails naming `what` and the peer after `timeout_s`.
std::string recv_bytes(int source, int tag, MPI_Comm comm, double timeout_s, const char* what,
                       int* from = nullptr);
// The same, with `what` worked out only if the wait times out (a description
// too costly to build for every message).
std::string recv_bytes(int source, int tag, MPI_Comm comm, double timeout_s,
                       const std::function<std::string()>& what, int* from = nullptr);

// Waits for non-blocking calls (a collective's, a transfer's) by polling
// with back-off; fails, exiting 3, naming `what` after timeout_s. `what` is
// worked out only then.
void wait_requests(MPI_Request* requests, int count, double timeout_s,
                   const std::function<std::string()>& what);

// Whether a message with `tag` (any tag: MPI_ANY_TAG) is waiting; fills
// *source and *tag.
bool poll_message(int source, int tag, MPI_Comm comm, int* found_source, int* found_tag);

// Sleeps a little, more the longer nothing happened (up to 1 ms).
void backoff(int* idle_rounds);

}  // namespace meshloom::comm
