#include "sources/worker_pool.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

namespace meshloom::sources {
namespace {

class WorkerPool {
 public:
  static WorkerPool& instance() {
    static WorkerPool* pool = new WorkerPool;
    return *pool;
  }
  void run(size_t n, int threads, const std::function<void(size_t)>& fn) {
    if (n == 0) return;
    std::lock_guard<std::mutex> one_job(job_mutex_);
    std::unique_lock<std::mutex> lock(mutex_);
    const size_t k = size_t(std::max(1, threads));
    while (workers_ < k) std::thread([this, id = workers_++] { work(id); }).detach();
    fn_ = &fn;
    n_ = n;
    next_ = 0;
    active_ = k;
    pending_ = k;
    error_ = nullptr;
    ++generation_;
    start_.notify_all();
    done_.wait(lock, [&] { return pending_ == 0; });
    fn_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void work(size_t id) {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      start_.wait(lock, [&] { return generation_ != seen; });
      seen = generation_;
      if (id >= active_) continue;  // not needed for this job
      lock.unlock();
      std::exception_ptr error;
      try {
        for (size_t i = next_++; i < n_; i = next_++) (*fn_)(i);
      } catch (...) {
        error = std::current_exception();
        next_ = n_;  // the others stop too
      }
      lock.lock();
      if (error && !error_) error_ = error;
      if (--pending_ == 0) done_.notify_all();
    }
  }

  std::mutex job_mutex_, mutex_;
  std::condition_variable start_, done_;
  size_t workers_ = 0, active_ = 0, pending_ = 0;
  uint64_t generation_ = 0;
  const std::function<void(size_t)>* fn_ = nullptr;
  size_t n_ = 0;
  std::atomic<size_t> next_{0};
  std::exception_ptr error_;
};

}  // namespace

void run_on_workers(size_t n, int threads, const std::function<void(size_t)>& fn) {
  WorkerPool::instance().run(n, threads, fn);
}

}  // namespace meshloom::sources
