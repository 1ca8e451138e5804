#include "base/memory.hpp"

#include <malloc.h>
#include <sys/resource.h>

#include <cstdio>
#include <string>

#include "base/clock.hpp"
#include "base/strings.hpp"

namespace meshloom {

int64_t peak_rss_kib() {
  struct rusage u {};
  getrusage(RUSAGE_SELF, &u);
  return int64_t(u.ru_maxrss);
}

int64_t pss_kib(int pid) {
  const std::string path =
      pid > 0 ? strf("/proc/%d/smaps_rollup", pid) : std::string("/proc/self/smaps_rollup");
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return 0;
  char line[256];
  int64_t kib = 0;
  while (std::fgets(line, sizeof(line), f))
    if (std::sscanf(line, "Pss: %lld kB", reinterpret_cast<long long*>(&kib)) == 1) break;
  std::fclose(f);
  return kib;
}

void HeapTrim::maybe() {
  const double now = std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
  if (!dirty_ || (last_ >= 0 && now - last_ < 0.5)) return;
  malloc_trim(0);
  dirty_ = false;
  last_ = now;
}

}  // namespace meshloom
