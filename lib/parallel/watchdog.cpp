#include "parallel/watchdog.hpp"

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>

#include "base/check.hpp"
#include "parallel/world.hpp"

namespace meshloom::parallel {
namespace {

std::mutex g_mutex;
std::string g_what;  // "" when not waiting
std::chrono::steady_clock::time_point g_since;
std::atomic<bool> g_started{false};

void watch(double timeout_s) {
  while (true) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_what.empty()) continue;
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - g_since).count();
    if (waited <= timeout_s) continue;
    std::fprintf(stderr,
                 "meshloom: watchdog: rank %d (%s on %s) has waited %.0f s for %s; aborting the "
                 "job so that it can be restarted (--resume auto)\n",
                 process_rank(), process_role().c_str(), host_name().c_str(), waited,
                 g_what.c_str());
    std::fflush(stderr);
    record_exit(3);
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
}

}  // namespace

void start_watchdog(double timeout_s) {
  if (g_started.exchange(true)) return;
  std::thread(watch, timeout_s).detach();
}

WatchScope::WatchScope(std::string what) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_what = std::move(what);
  g_since = std::chrono::steady_clock::now();
}

WatchScope::~WatchScope() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_what.clear();
}

}  // namespace meshloom::parallel
