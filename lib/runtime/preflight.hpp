// Start-up checks of `meshloom train` that rank 0 runs before any role starts
// (inside preflight_on_root, so a failure is one message and every rank
// exits 2), and the dry run.
#pragma once

#include "parallel/world.hpp"
#include "runtime/train_job.hpp"

namespace meshloom::runtime {

// Every source opens, the CPU trainers fit the node's memory, and the folders
// and files the run writes (run.dir, checkpoint.dir, the dump file) can be
// written; --dump-step is a step of the run. Throws meshloom::Error naming
// the key or option.
void check_train_start(const parallel::World& w, const TrainRun& run);

// Writes the effective config to run.dir/config.yaml, so a run can be repeated.
void save_effective_config(const parallel::World& w);

// --dry-run: rank 0 prints the effective config, the layout and the backend;
// it writes nothing (a run folder's config.yaml stays). Returns the exit code.
int print_dry_run(const parallel::World& w);

}  // namespace meshloom::runtime
