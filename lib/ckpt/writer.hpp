// Writes checkpoints on a background thread, so training continues while the
// file is written: the caller hands over a complete copy (taken between two
// steps) and goes on; the next checkpoint waits only if the previous one is
// still being written. A format 2 checkpoint (checkpoint.hpp) arrives with its
// tensors already in NAME.tmp; the writer adds the rest. After each write, this run's old
// checkpoints are pruned (`ours` tells them from another run's).
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "ckpt/background_jobs.hpp"
#include "ckpt/checkpoint.hpp"

namespace meshloom::ckpt {

class BackgroundWriter {
 public:
  // `done` is called on the writer thread after each write (path, bytes, seconds).
  BackgroundWriter(std::string dir, int64_t keep, IsOurs ours, bool background,
                   std::function<void(const std::string&, int64_t, double)> done);
  void write(Checkpoint c);
  // Runs `make` on the writer thread, then writes (or, format 2, finishes)
  // the checkpoint it returns: the trainers' collective part, then the rest.
  void write(std::function<Checkpoint()> make);
  void wait() { jobs_.wait(); }  // until nothing is pending
  // The error of a failed background write ("" when none), raised by the caller.
  std::string error() { return jobs_.error(); }

 private:
  using Clock = std::chrono::steady_clock;
  void write_one(const Checkpoint& c, Clock::time_point start);
  std::string dir_;
  int64_t keep_;
  IsOurs ours_;
  std::function<void(const std::string&, int64_t, double)> done_;
  BackgroundJobs jobs_;  // last: its thread stops before the rest goes
};

}  // namespace meshloom::ckpt
