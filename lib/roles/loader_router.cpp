#include "roles/loader_router.hpp"

#include <chrono>

#include "base/log.hpp"
#include "base/strings.hpp"
#include "comm/mpi_check.hpp"
#include "comm/p2p.hpp"

namespace meshloom::roles {

LoaderRouter::LoaderRouter(const parallel::World& w)
    : w_(w),
      plan_(parallel::loader_shadows(w.layout, w.hosts)),
      timeout_(w.config.faults.loader_timeout) {}

int LoaderRouter::route(int loader) const {
  const int r = plan_.route(loader, dead_);
  if (r >= 0) return r;
  ML_FAIL(
      strf("every loader is dead (none answered within faults.loader_timeout %.3g s): the "
           "data path cannot go on",
           timeout_));
}

// Who serves `loader` now that `failed` (itself, or the one that served it)
// is dead, in words. Routing goes from `loader` each time, so that all its
// requests reach the same loader whichever of them found the death.
std::string LoaderRouter::taking_over(int loader, int failed) const {
  const int next = route(loader);
  if (failed == loader && next == plan_.shadow.at(loader))
    return strf("its shadow, rank %d, takes over", next);
  return strf("rank %d takes over loader rank %d's requests", next, loader);
}

// A send to a loader. Its buffer must outlive a send that may never complete
// (a dead loader): a failed exchange leaks it on purpose, a few bytes once per
// dead loader.
LoaderRouter::Sent LoaderRouter::post(int rank, int tag, const std::string& payload) {
  Sent s;
  s.buffer = new std::string(payload);
  s.ok = comm::peer_call_ok(MPI_Isend(s.buffer->data(), int(s.buffer->size()), MPI_BYTE, rank, tag,
                                      MPI_COMM_WORLD, &s.request));
  return s;
}

// Waits for the reply with the loader timeout. False when the loader does not
// answer in time or MPI reports its process gone.
bool LoaderRouter::await(int rank, int reply_tag, Sent* sent, std::string* reply) {
  if (!sent->ok) return false;
  const auto start = std::chrono::steady_clock::now();
  bool done = false;
  int idle = 0;
  MPI_Request recv = MPI_REQUEST_NULL;
  while (true) {
    if (!done) {
      int flag = 0;
      if (!comm::peer_call_ok(MPI_Test(&sent->request, &flag, MPI_STATUS_IGNORE))) return false;
      done = flag != 0;
      if (done) {
        delete sent->buffer;
        sent->buffer = nullptr;
      }
    }
    // Match the reply, then receive it without blocking: a loader killed in
    // the middle of sending a large reply must not hang its requester.
    if (recv == MPI_REQUEST_NULL) {
      int flag = 0;
      MPI_Message message;
      MPI_Status status;
      if (!comm::peer_call_ok(
              MPI_Improbe(rank, reply_tag, MPI_COMM_WORLD, &flag, &message, &status)))
        return false;
      if (flag) {
        int count = 0;
        MPI_Get_count(&status, MPI_BYTE, &count);
        reply->assign(size_t(count), '\0');
        if (!comm::peer_call_ok(MPI_Imrecv(reply->data(), count, MPI_BYTE, &message, &recv)))
          return false;
      }
    }
    if (recv != MPI_REQUEST_NULL) {
      int flag = 0;
      if (!comm::peer_call_ok(MPI_Test(&recv, &flag, MPI_STATUS_IGNORE))) return false;
      if (flag) {
        if (!done) {
          MPI_Wait(&sent->request, MPI_STATUS_IGNORE);  // it answered, so it received
          delete sent->buffer;
          sent->buffer = nullptr;
        }
        return true;
      }
    }
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >
        timeout_) {
      if (!done) MPI_Request_free(&sent->request);
      if (recv != MPI_REQUEST_NULL) {
        // A reply cut off mid-way: its buffer must outlive the request.
        new std::string(std::move(*reply));
        MPI_Request_free(&recv);
      }
      return false;
    }
    comm::backoff(&idle);
  }
}

bool LoaderRouter::exchange(int rank, int tag, const std::string& payload, int reply_tag,
                            std::string* reply) {
  Sent sent = post(rank, tag, payload);
  return await(rank, reply_tag, &sent, reply);
}

std::vector<std::string> LoaderRouter::request_many(const std::vector<int>& loaders,
                                                    const std::vector<std::string>& payloads,
                                                    int tag, int reply_tag, const char* what,
                                                    std::vector<int>* served_by) {
  std::vector<int> ranks;
  std::vector<Sent> sent;
  for (size_t i = 0; i < loaders.size(); ++i) {
    ranks.push_back(route(loaders[i]));
    sent.push_back(post(ranks.back(), tag, payloads[i]));
  }
  std::vector<std::string> replies(loaders.size());
  served_by->assign(loaders.size(), -1);
  for (size_t i = 0; i < loaders.size(); ++i) {
    const auto start = std::chrono::steady_clock::now();
    if (await(ranks[i], reply_tag, &sent[i], &replies[i])) {
      (*served_by)[i] = ranks[i];
      continue;
    }
    stall_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    dead_.insert(ranks[i]);
    LOG_WARN("loader rank %d did not answer %s within %.1f s: counted dead; %s", ranks[i], what,
             timeout_, taking_over(loaders[i], ranks[i]).c_str());
    replies[i] = request(loaders[i], tag, payloads[i], reply_tag, what, &(*served_by)[i]);
  }
  return replies;
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
    LOG_WARN("loader rank %d did not answer %s within %.1f s: counted dead; %s (stall %s)", rank,
             what, timeout_, taking_over(loader, rank).c_str(), human_seconds(lost).c_str());
    rank = route(loader);
  }
}

}  // namespace meshloom::roles
