// `meshloom plan`: plan one step from a file of sequence lengths, check the
// plan, print what it predicts, and optionally dump it (JSON, binary), draw it
// next to the static grid's plan (--png), or calibrate the cost model from
// measured micro-batches (--calibrate); with a config instead of lengths, the
// data plane's real steps (runtime/plan_preview.hpp). No MPI.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace meshloom::runtime {

// What `meshloom plan` was asked (the CLI's options, app/cmd_plan.cpp).
struct PlanRequest {
  std::string lengths;
  int trainers = 0;
  int trainers_per_node = 0;  // > 0: that many trainers a node, in blocks (explicit nodes)
  std::string capacity = "8K";
  std::string planner = "hdp";
  std::string model = "llama-7b";
  std::string batch, context, seq_len_max;
  uint64_t seed = 1;
  double slack = 0.02;
  bool offload = false;
  bool static_fallback = false;
  std::string cp_algorithm = "ring";
  int tp = 1;
  int pp = 1;  // > 1: pipelines of pp stages, PP-Balance against round-robin
  double tflops = 312, mfu = 0.45, bandwidth = 25, nvlink = 150;
  std::string json, out, png, calibrate;
  std::string config;  // plan the real data plane's steps instead of --lengths
  std::vector<std::string> sets;
  int64_t steps = 10;
};

// Prints the plan's summary; returns the exit code (1: the plan is invalid).
// Throws Error for bad input (a missing file, an unknown planner).
int plan_command(const PlanRequest& request);

}  // namespace meshloom::runtime
