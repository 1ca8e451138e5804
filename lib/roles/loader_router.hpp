// Requests to loaders, with failover to shadows.
//
// Each loader has a shadow, on another node whenever loaders exist on two or
// more (parallel/shadows.hpp). A loader that does not answer within
// faults.loader_timeout (dead, hung, or its process killed) counts as dead
// from then on, and its requests go to its shadow, which already has the dead
// loader's sources open and has been preparing the documents the dead one
// prepared (mirrored deltas); with the shadow dead too, to the next live
// loader in the shadow order. Any loader can serve any document, so the
// batches stay exactly the same: nothing is lost or repeated, the stall is the
// timeout. The lead and every constructor keep their own router and find out
// on their own.
#pragma once

#include <mpi.h>

#include <set>
#include <string>
#include <vector>

#include "parallel/shadows.hpp"
#include "parallel/world.hpp"

namespace meshloom::roles {

class LoaderRouter {
 public:
  explicit LoaderRouter(const parallel::World& w);
  // The reply to `payload` from `loader` (a world rank) or, if it fails, from
  // the next live loader; *served_by gets who answered. Fails the job only
  // when no loader at all is left.
  std::string request(int loader, int tag, const std::string& payload, int reply_tag,
                      const char* what, int* served_by = nullptr);
  // Requests to several different loaders at once: all are sent first, then
  // the replies collected, so the loaders work in parallel; one that fails is
  // retried on its shadow. Targets must be distinct ranks.
  std::vector<std::string> request_many(const std::vector<int>& loaders,
                                        const std::vector<std::string>& payloads, int tag,
                                        int reply_tag, const char* what,
                                        std::vector<int>* served_by);
  // One try at `rank` alone, no failover: false when it does not answer in time.
  bool try_request(int rank, int tag, const std::string& payload, int reply_tag,
                   std::string* reply) {
    return exchange(rank, tag, payload, reply_tag, reply);
  }
  // Who serves `loader` now: itself while alive, else its shadow, else the
  // next live loader in the shadow order (ShadowPlan::route).
  int route(int loader) const;
  const parallel::ShadowPlan& shadows() const { return plan_; }
  bool dead(int rank) const { return dead_.count(rank) > 0; }
  const std::set<int>& dead_loaders() const { return dead_; }

 private:
  std::string taking_over(int loader, int failed) const;
  bool exchange(int rank, int tag, const std::string& payload, int reply_tag, std::string* reply);
  // The two halves of exchange(): a send whose buffer outlives it, and the wait.
  struct Sent {
    std::string* buffer = nullptr;
    MPI_Request request = MPI_REQUEST_NULL;
    bool ok = false;
  };
  Sent post(int rank, int tag, const std::string& payload);
  bool await(int rank, int reply_tag, Sent* sent, std::string* reply);
  const parallel::World& w_;
  parallel::ShadowPlan plan_;
  std::set<int> dead_;
  double timeout_;
  double stall_ = 0;  // seconds lost waiting for loaders that turned out dead
};

}  // namespace meshloom::roles
