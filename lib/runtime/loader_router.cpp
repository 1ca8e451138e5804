#include "runtime/loader_router.hpp"

#include <chrono>

#include "base/log.hpp"
#include "base/strings.hpp"
#include "comm/p2p.hpp"

namespace meshloom {

LoaderRouter::LoaderRouter(const World& w) : w_(w), timeout_(w.config.faults.loader_timeout) {
  for (int l = 0; l < w.layout.loaders; ++l) ring_.push_back(w.layout.first_rank(Role::loader) + l);
}

int LoaderRouter::route(int loader) const {
  size_t i = 0;
  while (i < ring_.size() && ring_[i] != loader) ++i;
  ML_CHECK(i < ring_.size(), strf("rank %d is not a loader", loader));
  for (size_t k = 0; k < ring_.size(); ++k) {
    int r = ring_[(i + k) % ring_.size()];
    if (!dead(r)) return r;
  }
  ML_FAIL("every loader is dead: the data path cannot go on");
}

// One try: send, then wait for the reply with the loader timeout. Returns
// false (and leaves the send to complete, or not, on its own) when the
// loader does not answer in time or MPI reports its process gone.
bool LoaderRouter::exchange(int rank, int tag, const std::string& payload, int reply_tag,
                            std::string* reply) {
  // The buffer must outlive a send that may never complete: a failed
  // exchange leaks it on purpose (a few bytes, once per dead loader).
  auto* buffer = new std::string(payload);
  MPI_Request req;
  if (MPI_Isend(buffer->data(), int(buffer->size()), MPI_BYTE, rank, tag, MPI_COMM_WORLD, &req) !=
      MPI_SUCCESS)
    return false;
  const auto start = std::chrono::steady_clock::now();
  bool sent = false;
  int idle = 0;
  while (true) {
    if (!sent) {
      int flag = 0;
      if (MPI_Test(&req, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) return false;
      sent = flag != 0;
      if (sent) delete buffer;
    }
    int flag = 0;
    MPI_Status status;
    if (MPI_Iprobe(rank, reply_tag, MPI_COMM_WORLD, &flag, &status) != MPI_SUCCESS) return false;
    if (flag) {
      int count = 0;
      MPI_Get_count(&status, MPI_BYTE, &count);
      reply->assign(size_t(count), '\0');
      if (MPI_Recv(reply->data(), count, MPI_BYTE, rank, reply_tag, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE) != MPI_SUCCESS)
        return false;
      if (!sent) {
        MPI_Wait(&req, MPI_STATUS_IGNORE);  // it answered, so it received
        delete buffer;
      }
      return true;
    }
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > timeout_) {
      if (!sent) MPI_Request_free(&req);
      return false;
    }
    backoff(&idle);
  }
}

std::string LoaderRouter::request(int loader, int tag, const std::string& payload, int reply_tag,
                                  const char* what, int* served_by) {
  std::string reply;
  int rank = route(loader);
  while (true) {
    const auto start = std::chrono::steady_clock::now();
    if (exchange(rank, tag, payload, reply_tag, &reply)) {
      if (served_by) *served_by = rank;
      return reply;
    }
    const double lost =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    stall_ += lost;
    dead_.insert(rank);
    const int next = route(rank);
    LOG_WARN("loader rank %d did not answer %s within %.1f s: counted dead; its shadow, rank %d, "
             "takes over (stall %s)",
             rank, what, timeout_, next, human_seconds(lost).c_str());
    rank = next;
  }
}

}  // namespace meshloom
