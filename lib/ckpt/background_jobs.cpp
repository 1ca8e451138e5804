#include "ckpt/background_jobs.hpp"

#include "base/check.hpp"

namespace meshloom::ckpt {

BackgroundJobs::BackgroundJobs(bool background) : background_(background) {
  if (background_) thread_ = std::thread([this] { run(); });
}

BackgroundJobs::~BackgroundJobs() {
  if (!background_) return;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return !pending_ && !busy_; });
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void BackgroundJobs::run_one(const std::function<void()>& job) {
  try {
    job();
  } catch (const Error& e) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (error_.empty()) error_ = e.what();
  }
}

void BackgroundJobs::submit(std::function<void()> job) {
  if (!background_) return run_one(job);
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return !pending_ && !busy_; });
  pending_ = std::move(job);
  lock.unlock();
  cv_.notify_all();
}

void BackgroundJobs::wait() {
  if (!background_) return;
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return !pending_ && !busy_; });
}

std::string BackgroundJobs::error() {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

void BackgroundJobs::run() {
  while (true) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return pending_ || stop_; });
      if (stop_ && !pending_) return;
      job = std::move(pending_);
      pending_ = nullptr;
      busy_ = true;
    }
    run_one(job);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      busy_ = false;
    }
    cv_.notify_all();
  }
}

}  // namespace meshloom::ckpt
