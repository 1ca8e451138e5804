#include "comm/p2p.hpp"

#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "base/strings.hpp"
#include "comm/mpi_check.hpp"

namespace meshloom::comm {

void send_bytes(const std::string& bytes, int dest, int tag, MPI_Comm comm) {
  ML_CHECK(bytes.size() < (size_t(1) << 31), "message over 2 GiB");
  MPI_CHECK(MPI_Send(bytes.data(), int(bytes.size()), MPI_BYTE, dest, tag, comm));
}

PendingSend::PendingSend(std::string bytes, int dest, int tag, MPI_Comm comm)
    : bytes_(std::make_unique<std::string>(std::move(bytes))) {
  ML_CHECK(bytes_->size() < (size_t(1) << 31), "message over 2 GiB");
  MPI_CHECK(MPI_Isend(bytes_->data(), int(bytes_->size()), MPI_BYTE, dest, tag, comm, &request_));
}

// The buffer lives on the heap behind a unique_ptr, so moving keeps the
// address MPI is reading from.
PendingSend::PendingSend(PendingSend&& other) noexcept
    : bytes_(std::move(other.bytes_)), request_(other.request_) {
  other.request_ = MPI_REQUEST_NULL;
}

PendingSend::~PendingSend() {
  if (request_ != MPI_REQUEST_NULL) MPI_Wait(&request_, MPI_STATUS_IGNORE);
}

void PendingSend::abandon() {
  if (request_ == MPI_REQUEST_NULL) return;
  // A send that has completed meanwhile frees its buffer as usual.
  int flag = 0;
  if (peer_call_ok(MPI_Test(&request_, &flag, MPI_STATUS_IGNORE)) && flag) return;
  if (request_ != MPI_REQUEST_NULL) MPI_Request_free(&request_);
  request_ = MPI_REQUEST_NULL;
  // The rest must outlive a send MPI may still read from: kept reachable for
  // the life of the process (LeakSanitizer reported them as lost memory at
  // every loader's exit when they were released here).
  static std::mutex mutex;
  static auto* kept = new std::vector<std::unique_ptr<std::string>>;
  std::lock_guard<std::mutex> lock(mutex);
  kept->push_back(std::move(bytes_));
}

bool PendingSend::done() {
  if (request_ == MPI_REQUEST_NULL) return true;
  int flag = 0;
  // A send to a process that died fails here: count it as done (dropped).
  if (!peer_call_ok(MPI_Test(&request_, &flag, MPI_STATUS_IGNORE))) {
    abandon();
    return true;
  }
  return flag != 0;
}

void backoff(int* idle_rounds) {
  int n = ++*idle_rounds;
  if (n < 50) {
    std::this_thread::yield();
    return;
  }
  int us = n < 200 ? 20 : (n < 1000 ? 200 : 1000);
  std::this_thread::sleep_for(std::chrono::microseconds(us));
}

bool poll_message(int source, int tag, MPI_Comm comm, int* found_source, int* found_tag) {
  int flag = 0;
  MPI_Status status;
  MPI_CHECK(MPI_Iprobe(source, tag, comm, &flag, &status));
  if (!flag) return false;
  if (found_source) *found_source = status.MPI_SOURCE;
  if (found_tag) *found_tag = status.MPI_TAG;
  return true;
}

std::string recv_bytes(int source, int tag, MPI_Comm comm, double timeout_s, const char* what,
                       int* from) {
  return recv_bytes(
      source, tag, comm, timeout_s, [what] { return std::string(what); }, from);
}

std::string recv_bytes(int source, int tag, MPI_Comm comm, double timeout_s,
                       const std::function<std::string()>& what, int* from) {
  const auto start = std::chrono::steady_clock::now();
  int idle = 0;
  MPI_Status status;
  while (true) {
    int flag = 0;
    MPI_CHECK(MPI_Iprobe(source, tag, comm, &flag, &status));
    if (flag) break;
    double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited > timeout_s) {
      std::string peer = source == MPI_ANY_SOURCE ? "any rank" : "rank " + std::to_string(source);
      ML_TIMEOUT(
          strf("waited %.0f s for %s from %s (tag %d) and got nothing: that rank is dead, "
               "hung or far behind (run.timeout sets this limit)",
               waited, what().c_str(), peer.c_str(), tag));
    }
    backoff(&idle);
  }
  int count = 0;
  MPI_CHECK(MPI_Get_count(&status, MPI_BYTE, &count));
  std::string bytes(size_t(count), '\0');
  MPI_CHECK(MPI_Recv(bytes.data(), count, MPI_BYTE, status.MPI_SOURCE, status.MPI_TAG, comm,
                     MPI_STATUS_IGNORE));
  if (from) *from = status.MPI_SOURCE;
  return bytes;
}

void wait_requests(MPI_Request* requests, int count, double timeout_s,
                   const std::function<std::string()>& what) {
  const auto start = std::chrono::steady_clock::now();
  int idle = 0;
  while (true) {
    int done = 0;
    MPI_CHECK(MPI_Testall(count, requests, &done, MPI_STATUSES_IGNORE));
    if (done) return;
    double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited > timeout_s)
      ML_TIMEOUT(
          strf("waited %.0f s for %s: a member is dead, hung or far behind "
               "(run.timeout sets this limit)",
               waited, what().c_str()));
    backoff(&idle);
  }
}

}  // namespace meshloom::comm
