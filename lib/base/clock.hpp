// Seconds on the steady clock, for timings and deadlines (it never jumps).
#pragma once

#include <chrono>

namespace meshloom {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace meshloom
