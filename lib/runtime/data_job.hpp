// `meshloom data`: the data path alone on the real role layout. Trainers echo
// every batch back; rank 0 checks that every token of every sample arrived
// exactly once, with the right positions, and reports delivered tokens/s,
// per-source token shares against the schedule and each role's peak memory;
// optionally the exact global batches as HDF5 and the summary as JSON.
#pragma once

#include <cstdint>
#include <string>

#include "parallel/world.hpp"

namespace meshloom::runtime {

struct DataRun {
  int64_t steps = 20;
  std::string dump;    // HDF5 file for the global batches ("": none)
  std::string report;  // JSON file for the summary ("": none)
};

// Every rank's role for run.steps steps. Returns this rank's exit code.
int run_data(const parallel::World& w, const DataRun& run);

}  // namespace meshloom::runtime
