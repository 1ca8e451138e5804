// `meshloom train` after start-up: which checkpoint to continue from, then
// every rank's role until the run ends. Rank 0 leads (runtime/metrics.hpp
// says what it logs); trainers run train/trainer.hpp's step on each batch,
// with injected faults, step dumps and checkpoints written in the background
// by trainer 0.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "config/config.hpp"
#include "parallel/world.hpp"

namespace meshloom::runtime {

struct TrainRun {
  int64_t dump_step = -1;  // --dump-step N FILE
  std::string dump_file;
  std::string resume;      // --resume: "", "auto" or a checkpoint file
  bool overwrite = false;  // --overwrite: move checkpoints in the way aside
  int64_t stop_at = -1;    // --stop-at: stop before this step, as a preempted job would

  // The step this attempt stops before: run.steps, or --stop-at if earlier.
  int64_t end(const config::Config& c) const {
    return stop_at >= 0 ? std::min(c.run.steps, stop_at) : c.run.steps;
  }
};

// Rank 0 picks the checkpoint (skipping torn ones) and every rank learns it
// and the step training continues at; a dump step before it is refused, and a
// run with nothing left to train ends at once with kExitOk. Then the watchdog
// starts and every rank runs its role. Returns this rank's exit code.
int run_train(const parallel::World& w, const TrainRun& run);

}  // namespace meshloom::runtime
