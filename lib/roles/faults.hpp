// Injected faults (config faults.inject) of this rank: for drills and tests.
//   crash  the process kills itself with SIGKILL (a real death)
//   hang   a loader stops answering (it still obeys Stop so the job can end);
//          a trainer stops taking part (the watchdog ends the job)
//   slow   sleeps `seconds` per request (loader) or per step (trainer)
//   crash_writing  a trainer kills itself (SIGKILL) once it has written
//          `bytes` of its part of a checkpoint: a death mid-write
// Each fires from its `step` on.
#pragma once

#include "config/config.hpp"

namespace meshloom::roles {

struct InjectedFaults {
  const config::FaultConfig* crash = nullptr;
  const config::FaultConfig* hang = nullptr;
  const config::FaultConfig* slow = nullptr;
  const config::FaultConfig* crash_writing = nullptr;

  InjectedFaults(const config::Config& config, int world_rank) {
    for (const auto& f : config.faults.inject) {
      if (f.rank != world_rank) continue;
      if (f.kind == config::FaultKind::crash) crash = &f;
      if (f.kind == config::FaultKind::hang) hang = &f;
      if (f.kind == config::FaultKind::slow) slow = &f;
      if (f.kind == config::FaultKind::crash_writing) crash_writing = &f;
    }
  }
  bool crash_at(int64_t step) const { return crash && step >= crash->step; }
  bool hang_at(int64_t step) const { return hang && step >= hang->step; }
  double slow_at(int64_t step) const { return slow && step >= slow->step ? slow->seconds : 0.0; }
  // The bytes after which a checkpoint of step `step` kills this trainer (-1: never).
  int64_t crash_writing_after(int64_t step) const {
    return crash_writing && step >= crash_writing->step ? crash_writing->bytes : -1;
  }
};

}  // namespace meshloom::roles
