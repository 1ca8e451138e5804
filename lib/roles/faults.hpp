// Injected faults (config faults.inject) of this rank: for drills and tests.
//   crash  the process kills itself with SIGKILL (a real death)
//   hang   a loader stops answering (it still obeys Stop so the job can end);
//          a trainer stops taking part (the watchdog ends the job)
//   slow   sleeps `seconds` per request (loader) or per step (trainer)
// Each fires from its `step` on.
#pragma once

#include "config/config.hpp"

namespace meshloom::roles {

struct InjectedFaults {
  const config::FaultConfig* crash = nullptr;
  const config::FaultConfig* hang = nullptr;
  const config::FaultConfig* slow = nullptr;

  InjectedFaults(const config::Config& config, int world_rank) {
    for (const auto& f : config.faults.inject) {
      if (f.rank != world_rank) continue;
      if (f.kind == config::FaultKind::crash) crash = &f;
      if (f.kind == config::FaultKind::hang) hang = &f;
      if (f.kind == config::FaultKind::slow) slow = &f;
    }
  }
  bool crash_at(int64_t step) const { return crash && step >= crash->step; }
  bool hang_at(int64_t step) const { return hang && step >= hang->step; }
  double slow_at(int64_t step) const { return slow && step >= slow->step ? slow->seconds : 0.0; }
};

}  // namespace meshloom::roles
