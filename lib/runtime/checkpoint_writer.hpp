// A trainer's checkpoints. With checkpoint.collective every trainer writes
// its own part of the state into the file (format 2), then trainer 0 adds
// the rest (checksums, rename); without, trainer 0 gathers the whole state
// and writes it (format 1). With checkpoint.background both run on a thread
// while training goes on: the trainers' part on a communicator of its own
// where MPI takes calls from several threads, else between two steps. What
// was written is told to rank 0 in the next acknowledgement, and what it
// cost (bytes, stall, save time, memory) in the final report.
#pragma once

#include <mpi.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "ckpt/background_jobs.hpp"
#include "ckpt/writer.hpp"
#include "parallel/world.hpp"
#include "roles/faults.hpp"
#include "train/trainer.hpp"
#include "wire/protocol.hpp"

namespace meshloom::runtime {

class CheckpointWriter {
 public:
  // Collective over the trainers (`trainers`: all of them). `faults` may
  // hold a drill that kills this trainer mid-write (crash_writing).
  CheckpointWriter(const parallel::World& w, MPI_Comm trainers,
                   const roles::InjectedFaults& faults);
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // The state after step `step`; collective over the trainers.
  void save(train::Trainer& trainer, int64_t step, const std::string& lead_data);
  // Waits for the checkpoint being written: HDF5 is not thread-safe, and the
  // last acknowledgement should tell of the last checkpoint.
  void wait();
  // Appends what was written since the last call to `note`; a failed write
  // ends the job.
  void add_note(std::string* note);
  // This rank's checkpoint totals, for its final report.
  void add_totals(wire::Report* report);

 private:
  void save_collective(train::Trainer& trainer, int64_t step, const std::string& lead_data);
  void written(const std::string& path, int64_t bytes, double seconds);
  train::BytesWritten counter(int64_t step);
  static ckpt::Checkpoint rest_of(train::Trainer& trainer, int64_t step,
                                  const std::string& lead_data, train::StateChecksums sums);
  bool collective_, background_part_;
  std::string dir_, how_;
  const roles::InjectedFaults& faults_;
  int rank_;
  MPI_Comm comm_ = MPI_COMM_NULL;  // the trainers' background part (background_part_)
  std::unique_ptr<ckpt::BackgroundWriter> writer_;  // trainer 0
  std::unique_ptr<ckpt::BackgroundJobs> jobs_;      // the others, background_part_
  std::mutex mutex_;                                // note_, save_seconds_
  std::string note_;
  // Totals: the writer thread adds bytes and (trainer 0) save seconds.
  int32_t saves_ = 0;
  std::atomic<int64_t> bytes_{0};
  double stall_seconds_ = 0, save_seconds_ = 0;
  int64_t peak_rss_before_kib_ = 0;
};

}  // namespace meshloom::runtime
