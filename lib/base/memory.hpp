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

}  // namespace meshloom
