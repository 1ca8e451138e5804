#include "runtime/checkpoint_writer.hpp"

#include <csignal>
#include <cstdio>

#include "base/clock.hpp"
#include "base/memory.hpp"
#include "base/strings.hpp"
#include "ckpt/resume.hpp"
#include "comm/mpi_check.hpp"

namespace meshloom::runtime {

namespace {

std::string how_written(bool collective, bool background_part, bool background) {
  if (!collective) return "gathered on trainer 0";
  if (background_part) return "every trainer its part, in the background";
  return background ? "every trainer its part between two steps (MPI takes no calls from several "
                      "threads at once here)"
                    : "every trainer its part";
}

}  // namespace

CheckpointWriter::CheckpointWriter(const parallel::World& w, MPI_Comm trainers,
                                   const roles::InjectedFaults& faults)
    : collective_(w.config.checkpoint.collective),
      background_part_(collective_ && w.config.checkpoint.background &&
                       parallel::mpi_threads_multiple()),
      dir_(ckpt::checkpoint_dir(w.config)),
      how_(how_written(collective_, background_part_, w.config.checkpoint.background)),
      faults_(faults),
      rank_(w.rank) {
  if (w.config.checkpoint.every <= 0) return;
  if (background_part_) MPI_CHECK(MPI_Comm_dup(trainers, &comm_));
  if (w.role_index != 0) {
    if (background_part_) jobs_ = std::make_unique<ckpt::BackgroundJobs>(true);
    return;
  }
  const config::Config& config = w.config;
  writer_ = std::make_unique<ckpt::BackgroundWriter>(
      dir_, config.checkpoint.keep,
      [&config](const std::string& path) { return ckpt::written_by_this_run(path, config); },
      config.checkpoint.background,
      [this](const std::string& path, int64_t bytes, double seconds) {
        written(path, bytes, seconds);
      });
}

CheckpointWriter::~CheckpointWriter() {
  wait();
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void CheckpointWriter::written(const std::string& path, int64_t bytes, double seconds) {
  ckpt::reset_resume_attempts(dir_);
  std::lock_guard<std::mutex> lock(mutex_);
  save_seconds_ += seconds;
  // Appended: two checkpoints may finish between acknowledgements.
  note_ += strf("%scheckpoint %s written (%s): %s in %s", note_.empty() ? "" : "; ", path.c_str(),
                how_.c_str(), human_bytes(double(bytes)).c_str(), human_seconds(seconds).c_str());
}

void CheckpointWriter::save(train::Trainer& trainer, int64_t step, const std::string& lead_data) {
  if (saves_++ == 0) peak_rss_before_kib_ = peak_rss_kib();
  const Clock::time_point start = Clock::now();
  wait();  // HDF5 serves one user at a time: the last checkpoint first
  const Clock::time_point own = Clock::now();
  if (collective_) {
    save_collective(trainer, step, lead_data);
  } else if (writer_) {
    writer_->write(trainer.snapshot(step, lead_data));
    bytes_ += 3 * trainer.whole_layout().numel() * int64_t(sizeof(float));
  } else {
    trainer.snapshot(step, lead_data);  // the others send their shards
  }
  stall_seconds_ += seconds_since(start);
  // Trainer 0's save time: its part in the foreground, then the writer's.
  std::lock_guard<std::mutex> lock(mutex_);
  if (writer_) save_seconds_ += seconds_since(own);
}

void CheckpointWriter::save_collective(train::Trainer& trainer, int64_t step,
                                       const std::string& lead_data) {
  const std::string tmp = ckpt::checkpoint_path(dir_, step) + ".tmp";
  if (!background_part_) {
    const train::StateChecksums sums = trainer.save_state(tmp, counter(step));
    if (writer_) writer_->write(rest_of(trainer, step, lead_data, sums));
    return;
  }
  auto state = std::make_shared<train::OwnedState>(trainer.owned_state());
  auto part = [state, tmp, comm = comm_, &whole = trainer.whole_layout(), count = counter(step)] {
    return train::write_owned_state(tmp, comm, whole, *state, count);
  };
  if (!writer_) return jobs_->submit([part] { part(); });
  auto rest = std::make_shared<ckpt::Checkpoint>(rest_of(trainer, step, lead_data, {}));
  writer_->write([part, rest] {
    rest->tensor_sums = part();
    return std::move(*rest);
  });
}

// Counts the bytes this rank writes; a crash_writing drill dies once the
// checkpoint of `step` has taken it past its byte count.
train::BytesWritten CheckpointWriter::counter(int64_t step) {
  const int64_t limit = faults_.crash_writing_after(step);
  auto so_far = std::make_shared<int64_t>(0);
  return [this, limit, so_far, step](int64_t bytes) {
    bytes_ += bytes;
    *so_far += bytes;
    if (limit < 0 || *so_far < limit) return;
    std::fprintf(stderr,
                 "meshloom: fault injected: trainer rank %d dies writing the checkpoint of step "
                 "%lld, %lld bytes in\n",
                 rank_, (long long)step, (long long)*so_far);
    std::fflush(stderr);
    std::raise(SIGKILL);
  };
}

void CheckpointWriter::wait() {
  if (writer_) writer_->wait();
  if (jobs_) jobs_->wait();
}

void CheckpointWriter::add_note(std::string* note) {
  const std::string failed = writer_ ? writer_->error() : jobs_ ? jobs_->error() : "";
  if (!failed.empty()) ML_FAIL("checkpoint write failed: " + failed);
  std::lock_guard<std::mutex> lock(mutex_);
  if (!note_.empty()) *note += (note->empty() ? "" : "; ") + note_;
  note_.clear();
}

void CheckpointWriter::add_totals(wire::Report* report) {
  wait();
  std::lock_guard<std::mutex> lock(mutex_);
  report->checkpoints = saves_;
  report->checkpoint_bytes = bytes_;
  report->checkpoint_stall_seconds = stall_seconds_;
  report->checkpoint_save_seconds = save_seconds_;
  report->peak_rss_before_checkpoints_kib = saves_ > 0 ? peak_rss_before_kib_ : peak_rss_kib();
}

ckpt::Checkpoint CheckpointWriter::rest_of(train::Trainer& trainer, int64_t step,
                                           const std::string& lead_data,
                                           train::StateChecksums sums) {
  ckpt::Checkpoint c = trainer.checkpoint_rest(step, lead_data);
  c.format = 2;
  c.tensor_sums = std::move(sums);
  return c;
}

}  // namespace meshloom::runtime
