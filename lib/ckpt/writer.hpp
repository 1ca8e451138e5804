// Writes checkpoints on a background thread, so training continues while the
// file is written: the caller hands over a complete copy (taken between two
// steps) and goes on; the next checkpoint waits only if the previous one is
// still being written. A format 2 checkpoint (checkpoint.hpp) arrives with its
// tensors already in NAME.tmp; the writer adds the rest. After each write, this run's old
// checkpoints are pruned (`ours` tells them from another run's).
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "ckpt/checkpoint.hpp"

namespace meshloom::ckpt {

class BackgroundWriter {
 public:
  // `done` is called on the writer thread after each write (path, bytes, seconds).
  BackgroundWriter(std::string dir, int64_t keep, IsOurs ours, bool background,
                   std::function<void(const std::string&, int64_t, double)> done);
  ~BackgroundWriter();  // finishes the pending write
  void write(Checkpoint c);
  void wait();  // until nothing is pending
  // The error of a failed background write ("" when none), raised by the caller.
  std::string error();

 private:
  void run();
  void write_one(const Checkpoint& c);
  std::string dir_;
  int64_t keep_;
  IsOurs ours_;
  bool background_;
  std::function<void(const std::string&, int64_t, double)> done_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::optional<Checkpoint> pending_;
  bool busy_ = false, stop_ = false;
  std::string error_;
  std::thread thread_;
};

}  // namespace meshloom::ckpt
