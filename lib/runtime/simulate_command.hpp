// `meshloom simulate`: HDP against the static DP x CP grid at cluster scale,
// with no data, no MPI and no GPU. Batches are drawn from a named length
// distribution (byted, github, ...) or a lengths file, every planner plans the
// same batch, and the cost model predicts each step
// (plan/simulate/simulate.hpp). With --pp, HDP ranks are pipelines and the
// static 3D mesh, DP-Balance and PP-Balance are compared instead
// (plan/simulate/simulate_pipeline.hpp). --png draws step 0 as `plan --png`
// draws its batch (runtime/plan_chart.hpp). --checkpoint-fs prints what a
// checkpoint costs instead, gathered against collective.
#pragma once

#include <string>

#include "plan/simulate/simulate.hpp"

namespace meshloom::runtime {

// What `meshloom simulate` was asked, in the CLI's units (app/cmd_simulate.cpp).
struct SimulateRequest {
  plan::SimulateSpec spec;  // the fields the CLI sets as they are
  int trainers = 0;         // > 0: overrides spec.gpus (GPUs = trainers x tp)
  std::string context = "2M", batch = "32M", capacity = "8K";
  std::string lengths = "byted";
  double tflops = 312, bandwidth = 25, nvlink = 150, latency_us = 10, host = 20, mb_ms = 0;
  double host_memory = 256, gpu_memory = 80;
  std::string planners = "static,naive,bytescale,hdp";
  std::string cp_algorithm = "ring";
  std::string pp;   // "": no pipelines; N or auto
  std::string csv;  // append one line per planner (or pipeline setup)
  std::string png;  // draw step 0
  bool no_validate = false;
  // > 0: the checkpoint model instead of planning (plan/cost/checkpoint_cost.hpp):
  // the file system's GB/s, one writer's GB/s.
  double checkpoint_fs = 0, checkpoint_writer = 2;
};

// Prints the comparison; returns the exit code (kExitBadInput when no
// planner could plan). Throws Error for bad input.
int simulate_command(const SimulateRequest& request);

}  // namespace meshloom::runtime
