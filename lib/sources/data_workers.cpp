// DataLoader-style worker processes for the colocated baseline.
#include "sources/data_workers.hpp"

#include <poll.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include "base/check.hpp"
#include "base/memory.hpp"
#include "base/strings.hpp"

extern char** environ;

namespace meshloom::sources {

namespace {

constexpr int kWorkerFd = 3;  // the socket's number in the worker

// Frames are a little-endian u64 length and the bytes. A worker that fails
// sends its error as a last frame with the top bit of the length set, so the
// trainer reports it as its own: one message.
constexpr uint64_t kErrorFrame = uint64_t(1) << 63;

bool write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= size_t(k);
  }
  return true;
}

// Reads n bytes; false at end of input or on error. `deadline_ms` < 0 waits
// forever; a timeout sets *timed_out.
bool read_all(int fd, char* p, size_t n, int deadline_ms, bool* timed_out) {
  size_t got = 0;
  while (got < n) {
    if (deadline_ms >= 0) {
      pollfd pfd{fd, POLLIN, 0};
      int r = ::poll(&pfd, 1, deadline_ms);
      if (r < 0 && errno == EINTR) continue;
      if (r == 0) {
        if (timed_out) *timed_out = true;
        return false;
      }
    }
    ssize_t k = ::recv(fd, p + got, n - got, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    got += size_t(k);
  }
  return true;
}

bool write_frame(int fd, const std::string& bytes, uint64_t flags = 0) {
  uint64_t n = bytes.size() | flags;
  return write_all(fd, reinterpret_cast<const char*>(&n), sizeof(n)) &&
         write_all(fd, bytes.data(), bytes.size());
}

// A frame; *error says whether it is a worker's error message.
bool read_frame(int fd, std::string* bytes, int deadline_ms = -1, bool* timed_out = nullptr,
                bool* error = nullptr) {
  uint64_t n = 0;
  if (!read_all(fd, reinterpret_cast<char*>(&n), sizeof(n), deadline_ms, timed_out)) return false;
  if (error) *error = (n & kErrorFrame) != 0;
  n &= ~kErrorFrame;
  bytes->resize(size_t(n));
  return read_all(fd, bytes->data(), size_t(n), deadline_ms, timed_out);
}

std::string self_exe() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  ML_CHECK(n > 0, "cannot find this executable (/proc/self/exe) to start data workers");
  return std::string(buf, size_t(n));
}

}  // namespace

DataWorkerPool::DataWorkerPool(const config::Config& config, int rank) : rank_(rank) {
  const std::string exe = self_exe();
  const std::string text = config::to_yaml(config);
  for (int k = 0; k < int(config.data.colocated_processes); ++k) {
    int sv[2];
    ML_CHECK(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0,
             strf("socketpair for a data worker: %s", std::strerror(errno)));
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, sv[1], kWorkerFd);  // dup2 clears close-on-exec
    const std::string rank_s = std::to_string(rank), index_s = std::to_string(k);
    std::vector<char*> argv = {const_cast<char*>(exe.c_str()),
                               const_cast<char*>("data-worker"),
                               const_cast<char*>("--rank"),
                               const_cast<char*>(rank_s.c_str()),
                               const_cast<char*>("--index"),
                               const_cast<char*>(index_s.c_str()),
                               nullptr};
    pid_t pid = -1;
    const int err = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(sv[1]);
    if (err != 0) {
      ::close(sv[0]);
      ML_FAIL(strf("rank %d: cannot start data worker %d (%s): %s", rank, k, exe.c_str(),
                   std::strerror(err)));
    }
    workers_.push_back({pid, sv[0]});
    if (!write_frame(sv[0], text)) worker_failed(k, "did not take its config");
  }
}

DataWorkerPool::~DataWorkerPool() {
  for (auto& w : workers_) ::close(w.fd);  // end of input: the worker exits
  for (auto& w : workers_) {
    int status = 0;
    while (::waitpid(w.pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

void DataWorkerPool::worker_failed(int k, const std::string& what, bool closed) {
  const Worker& w = workers_[size_t(k)];
  std::string how = "is still running";
  int status = 0;
  pid_t r = ::waitpid(w.pid, &status, WNOHANG);
  if (r == 0 && closed) {
    // The socket closed: the worker is exiting. Give it a moment to be reaped.
    for (int i = 0; i < 50 && r == 0; ++i) {
      ::usleep(20000);
      r = ::waitpid(w.pid, &status, WNOHANG);
    }
  }
  if (r == w.pid)
    how = WIFEXITED(status) ? strf("exited with code %d", WEXITSTATUS(status))
                            : strf("was killed by signal %d", WTERMSIG(status));
  ML_FAIL(strf("rank %d: data worker %d (pid %d) %s, and %s", rank_, k, int(w.pid), what.c_str(),
               how.c_str()));
}

void DataWorkerPool::submit(const std::string& step_work) {
  ML_CHECK(in_flight() < size(), "every data worker is busy");
  const int k = int(submitted_ % int64_t(size()));
  if (!write_frame(workers_[size_t(k)].fd, step_work)) worker_failed(k, "closed its socket");
  ++submitted_;
}

std::string DataWorkerPool::take(double timeout) {
  ML_CHECK(in_flight() > 0, "no step was given to the data workers");
  const int k = int(taken_ % int64_t(size()));
  std::string batch;
  bool timed_out = false, error = false;
  const bool got =
      read_frame(workers_[size_t(k)].fd, &batch, int(timeout * 1000.0), &timed_out, &error);
  if (got && error) throw Error(strf("data worker %d: %s", k, batch.c_str()));
  if (!got)
    worker_failed(k,
                  timed_out ? strf("was silent for %.0f s (run.timeout)", timeout)
                            : std::string("stopped before sending its batch"),
                  !timed_out);
  ++taken_;
  return batch;
}

int64_t DataWorkerPool::pss_kib() const {
  int64_t sum = 0;
  for (const auto& w : workers_) sum += meshloom::pss_kib(int(w.pid));
  return sum;
}

int serve_data_worker(int fd, int rank, int index, const BuildBatch& build) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the trainer
  set_fatal_handler(throwing_fatal_handler);
  try {
    std::string text;
    if (!read_frame(fd, &text)) return 0;
    const config::Config config = config::parse_config(text, "the trainer's config");
    std::string msg;
    while (read_frame(fd, &msg)) {
      if (!write_frame(fd, build(config, msg))) return 0;  // the trainer is gone
    }
    return 0;
  } catch (const std::exception& e) {
    // The trainer reports it; say it here only if the trainer is gone.
    if (!write_frame(fd, e.what(), kErrorFrame)) {
      print_error(strf("data worker %d: %s", index, e.what()), std::to_string(rank));
    }
    return 2;
  }
}

}  // namespace meshloom::sources
