// What a checkpoint costs at scale, on paper: the time to save the whole
// training state and the training stall, gathered (trainer 0 receives the
// whole state and writes it alone: checkpoint.collective false, format 1)
// against collective (every trainer writes the blocks it owns into one file
// through parallel HDF5: format 2, train/state_blocks.hpp). The state is what
// meshloom stores: fp32 parameters and the two AdamW moments, 12 bytes a
// parameter. Bandwidths are parameters of the machine, not measured here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/shape.hpp"

namespace meshloom::plan {

struct CheckpointSetup {
  model::Shape model;
  int64_t gpus = 1024;
  int tp = 1, pp = 1;               // each trainer is a TP x PP group's member
  bool zero1 = true;                // moments sharded over the data ranks
  double fs_bandwidth = 100e9;      // bytes/s the file system takes from all writers
  double writer_bandwidth = 2e9;    // bytes/s one process writes
  double network_bandwidth = 25e9;  // bytes/s into one GPU's node (the gather)
  double host_bandwidth = 20e9;     // bytes/s GPU to host (the snapshot)
};

struct CheckpointCost {
  std::string method;  // "gathered" or "collective"
  double state_bytes = 0;
  double writer_bytes = 0;    // the most one process writes
  double writers = 0;         // processes that write
  double trainer0_bytes = 0;  // host memory trainer 0 holds for it
  double save_s = 0;          // from the step boundary to the file's rename
  double stall_s = 0;         // training stalls this long with background writing
  double sync_stall_s = 0;    // ... and this long without
};

// Both methods, gathered first.
std::vector<CheckpointCost> checkpoint_costs(const CheckpointSetup& s);

// A markdown table of the costs, with the setup in its title.
std::string checkpoint_report(const CheckpointSetup& s, const std::vector<CheckpointCost>& costs);

}  // namespace meshloom::plan
