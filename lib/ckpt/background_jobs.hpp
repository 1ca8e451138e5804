// One job at a time on a thread of its own, so that training goes on while a
// checkpoint is written: submit() waits for the previous job, hands the next
// over and returns. Without `background` a job runs at once, in the caller.
// A job that throws Error leaves its message for error(); the caller raises
// it (a failed checkpoint ends the job, but from the main thread).
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace meshloom::ckpt {

class BackgroundJobs {
 public:
  explicit BackgroundJobs(bool background);
  ~BackgroundJobs();  // finishes the pending job
  BackgroundJobs(const BackgroundJobs&) = delete;
  BackgroundJobs& operator=(const BackgroundJobs&) = delete;

  void submit(std::function<void()> job);
  void wait();  // until nothing is pending or running
  std::string error();

 private:
  void run();
  void run_one(const std::function<void()>& job);
  bool background_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::function<void()> pending_;
  bool busy_ = false, stop_ = false;
  std::string error_;
  std::thread thread_;
};

}  // namespace meshloom::ckpt
