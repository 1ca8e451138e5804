// Where the CPU model's time goes: wall and CPU seconds per kind of work,
// added up by a scoped timer around each part of forward and backward.
#pragma once

#include <time.h>

#include <chrono>

namespace meshloom::model {

// Time spent per kind of work since the last reset (forward + backward).
struct Times {
  double matmul = 0;     // projections and MLP GEMMs
  double attention = 0;  // block forward/backward (tiles, softmax)
  double head = 0;       // LM head GEMMs (lm_loss.hpp: all three run in forward)
  double loss = 0;       // softmax cross-entropy over the vocabulary
  double other = 0;      // embedding, norms, RoPE, SwiGLU, residual copies
  double tp = 0;         // collectives of activations over the TP group (tp > 1)
  double total() const { return matmul + attention + head + loss + other + tp; }
};
// wall: elapsed seconds. cpu: process CPU seconds / threads, which on a
// machine shared with other work is closer to what the step costs alone.
struct Profile {
  Times wall;
  Times cpu;
};

inline double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Adds the scope's wall and CPU time (divided by the thread count) to the
// profile field `field` of both Times; a null profile records nothing.
class Timer {
 public:
  Timer(Profile* p, double Times::*field, int threads)
      : p_(p),
        field_(field),
        threads_(threads),
        wall0_(std::chrono::steady_clock::now()),
        cpu0_(p ? process_cpu_seconds() : 0.0) {}
  ~Timer() {
    if (!p_) return;
    p_->wall.*field_ +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0_).count();
    p_->cpu.*field_ += (process_cpu_seconds() - cpu0_) / threads_;
  }
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

 private:
  Profile* p_;
  double Times::*field_;
  int threads_;
  std::chrono::steady_clock::time_point wall0_;
  double cpu0_;
};

}  // namespace meshloom::model
