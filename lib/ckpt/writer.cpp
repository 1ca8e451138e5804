#include "ckpt/writer.hpp"

#include <chrono>
#include <filesystem>

#include "base/check.hpp"

namespace meshloom::ckpt {

BackgroundWriter::BackgroundWriter(std::string dir, int64_t keep, IsOurs ours, bool background,
                                   std::function<void(const std::string&, int64_t, double)> done)
    : dir_(std::move(dir)),
      keep_(keep),
      ours_(std::move(ours)),
      background_(background),
      done_(std::move(done)) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) throw Error("cannot create checkpoint folder " + dir_ + ": " + ec.message());
  // A job killed while writing (scancel, preemption) leaves NAME.h5.tmp: never
  // read, and in the way of nothing, but clutter; this writer is the only one.
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec))
    if (entry.path().string().ends_with(".h5.tmp")) std::filesystem::remove(entry.path(), ec);
  if (background_) thread_ = std::thread([this] { run(); });
}

BackgroundWriter::~BackgroundWriter() {
  if (!background_) return;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return !pending_ && !busy_; });
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void BackgroundWriter::write_one(const Checkpoint& c) {
  const auto start = std::chrono::steady_clock::now();
  const std::string path = checkpoint_path(dir_, c.step);
  // Format 2: the trainers wrote the tensors into NAME.tmp; this adds the rest.
  const int64_t bytes =
      c.format == 2 ? finish_checkpoint(path + ".tmp", path, c) : write_checkpoint(path, c);
  prune_checkpoints(dir_, keep_, ours_);
  if (done_)
    done_(path, bytes,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

void BackgroundWriter::write(Checkpoint c) {
  if (!background_) {
    write_one(c);
    return;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return !pending_ && !busy_; });
  pending_ = std::move(c);
  lock.unlock();
  cv_.notify_all();
}

void BackgroundWriter::wait() {
  if (!background_) return;
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return !pending_ && !busy_; });
}

std::string BackgroundWriter::error() {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

void BackgroundWriter::run() {
  while (true) {
    Checkpoint c;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return pending_.has_value() || stop_; });
      if (stop_ && !pending_) return;
      c = std::move(*pending_);
      pending_.reset();
      busy_ = true;
    }
    try {
      write_one(c);
    } catch (const Error& e) {
      std::lock_guard<std::mutex> lock(mutex_);
      error_ = e.what();
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      busy_ = false;
    }
    cv_.notify_all();
  }
}

}  // namespace meshloom::ckpt
