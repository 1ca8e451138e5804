// `meshloom eval` after start-up: the held-out set (dataplane/eval_set.hpp)
// of the config's sources, evaluated forward only on the weights model.init
// names (a checkpoint or a Hugging Face model), through the same roles,
// planner and mesh as training, one held-out batch at a time with progress.
// Rank 0 logs the held-out loss by source and position, and writes
// eval_positions.csv into the output folder and, with a report file, the
// summary as JSON (docs/formats.md "Evaluation report").
#pragma once

#include <string>

#include "parallel/world.hpp"

namespace meshloom::runtime {

struct EvalRun {
  std::string out_dir;  // eval_positions.csv (and passkey results)
  std::string report;   // --report FILE: the JSON summary ("" none)
};

// The weights' source (model.init) and a held-out split (eval.holdout) are
// required: Error naming the key otherwise.
void check_eval_start(const parallel::World& w, const EvalRun& run);

// Every rank's role until the held-out set is evaluated; this rank's exit code.
int run_eval(const parallel::World& w, const EvalRun& run);

}  // namespace meshloom::runtime
