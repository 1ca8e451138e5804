// The watchdog: a thread that watches the blocking waits that have no
// deadline of their own (MPI collectives among trainers). A WatchScope marks
// such a wait; if one lasts longer than run.timeout, the watchdog prints which
// rank waits for what and aborts the whole job with exit code 3, so that the
// scheduler can restart it (--resume auto) instead of a job hanging for hours.
// Point-to-point waits carry their own deadlines (comm/p2p.hpp).
#pragma once

#include <string>

namespace meshloom::parallel {

// Starts the watchdog thread of this process (idempotent).
void start_watchdog(double timeout_s);

class WatchScope {
 public:
  explicit WatchScope(std::string what);
  ~WatchScope();
  WatchScope(const WatchScope&) = delete;
  WatchScope& operator=(const WatchScope&) = delete;
};

}  // namespace meshloom::parallel
