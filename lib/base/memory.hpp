// This process's memory, as the kernel counts it (for reports and benchmarks).
#pragma once

#include <cstdint>

namespace meshloom {

// Peak resident set of this process, KiB.
int64_t peak_rss_kib();
// Proportional set size of process `pid` (0: this one) now, KiB
// (/proc/PID/smaps_rollup): pages shared by several processes (a
// memory-mapped dataset) count once in the sum over processes. 0 where the
// kernel does not provide it.
int64_t pss_kib(int pid = 0);

// Gives the heap's free pages back to the system, at most twice a second and
// only after work since the last time (worked()). For the data roles, which
// free what they served: glibc keeps such chunks in its arenas (loaders:
// tokens and decoded images; rank 0: the patches it packed). Measured on
// bench_data: loaders within noise of their speed. Trainers do not: their
// next step would fault the same pages in again.
class HeapTrim {
 public:
  void worked() { dirty_ = true; }
  void maybe();

 private:
  bool dirty_ = false;
  double last_ = -1;  // seconds on the steady clock
};

}  // namespace meshloom
