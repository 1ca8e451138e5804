// The cluster-scale simulator behind `meshloom simulate`: draws global
// batches from a length distribution, plans each with every planner on the
// same batch, and reports predicted step time, balance and communication.
// No data, no MPI, no GPU: the cost model stands in for the machines.
//
// A trainer is one model replica slot of the HDP mesh: `tp` GPUs working as
// one tensor-parallel group. It gets tp x the GPU's FLOP rate and link
// bandwidth (K/V heads are sharded over TP, so each GPU sends its share), and
// gpus_per_node / tp trainers share a node.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/shape.hpp"
#include "plan/cost/cost_model.hpp"
#include "plan/cost/device_memory.hpp"
#include "plan/cp_algorithm.hpp"
#include "plan/io/lengths.hpp"
#include "plan/plan.hpp"

namespace meshloom::plan {

struct SimulateSpec {
  std::string model = "llama-7b";
  int32_t gpus = 1024;
  int32_t tp = 1;
  int32_t gpus_per_node = 8;
  int64_t context = 2 * 1024 * 1024;  // longest sample (static grid CP follows from it)
  int64_t batch = 32 * 1024 * 1024;   // global batch, tokens
  int64_t capacity = 8192;            // C per trainer; 0: from gpu_memory (capacity_auto)
  double gpu_memory = 80e9;           // bytes per GPU, for capacity 0
  double gpu_flops = 312e12;          // peak dense bf16 FLOP/s per GPU
  double mfu = 0.45;                  // share of the peak the kernels reach
  double gpu_bandwidth = 25e9;        // bytes/s per GPU across nodes
  double nvlink_bandwidth = 150e9;    // bytes/s per GPU inside a node
  double latency = 10e-6;
  double host_bandwidth = 20e9;  // bytes/s per GPU to host memory
  double host_memory = 256e9;    // pinned host bytes per GPU for offloading
  double micro_batch_overhead = 0;
  int steps = 1;
  uint64_t seed = 1;
  double slack = 0.02;
  bool offload = false;
  bool static_fallback = false;  // hdp takes the static grid's plan where it is faster
  config::CpAlgorithm cp_algorithm = config::CpAlgorithm::ring;  // of split sequences
  bool validate = true;     // check every plan (slow at 16K trainers with static)
  bool keep_first = false;  // keep each planner's plan of step 0 (SimRow::first; --png)
  std::vector<config::Planner> planners = {config::Planner::static_grid, config::Planner::naive,
                                           config::Planner::bytescale, config::Planner::hdp};
};

struct SimRow {
  config::Planner planner = config::Planner::hdp;
  double step_s = 0;
  double imbalance = 0;
  double gap = 0;    // step time / its own lower bound (busy / T, largest micro-batch)
  double ideal = 0;  // step time / ideal_step_time of the batch (the same for all)
  double comm_bytes = 0;
  double a2a_bytes = 0;     // of comm_bytes: Ulysses' all-to-alls
  std::vector<CpCount> cp;  // split sequences per CP algorithm, per step
  double planning_s = 0;    // median over steps
  double planning_max_s = 0;
  std::vector<double> planning;  // every step's
  double idle = 0;
  int32_t mb_min = 0, mb_max = 0;
  int64_t split = 0;
  int32_t max_group = 0;
  int32_t static_cp = 0;
  std::string error;          // set when the planner could not plan the batch
  std::optional<Plan> first;  // step 0's plan, with SimulateSpec::keep_first
};

struct SimResult {
  SimulateSpec spec;           // with the capacity used
  bool capacity_auto = false;  // it came from the GPU's memory (capacity_auto)
  model::Shape shape;
  CostModel cost;
  int32_t trainers = 0;
  double sequences = 0;      // per step, mean
  double ideal_s = 0;        // ideal_step_time per step, mean
  double balanced_s = 0;     // its perfect-balance term, mean
  int ring_bound_steps = 0;  // steps whose ideal is the longest sequence's fastest ring
  std::string distribution;
  std::vector<SimRow> rows;
  const SimRow* row(config::Planner planner) const;
};

Hardware trainer_hardware(const SimulateSpec& spec);

// The share of a GPU's memory the automatic capacity fills: the rest is for
// what the estimate leaves out (NCCL, cuBLAS, fragmentation).
constexpr double kUsableGpuMemory = 0.9;

// What the device estimate is asked for a trainer of the simulated run:
// bf16, ZeRO-1 over the `hdp_ranks`, rings over NCCL.
DeviceMemoryInput memory_input(const SimulateSpec& spec, const model::Shape& shape,
                               int32_t hdp_ranks);

// C for `capacity 0`: the most tokens a micro-batch of one trainer (a TP
// group of spec.tp GPUs) may hold so that TP rank 0 of it fits
// kUsableGpuMemory of spec.gpu_memory, per the CUDA backend's estimate
// (plan/cost/device_memory.hpp) in bf16 with ZeRO-1 over the trainers and rings
// over NCCL, rounded down to a multiple of 1024. Sharded weights and logits
// are what tensor parallelism buys here. Throws when not even the model's
// state fits.
int64_t capacity_auto(const SimulateSpec& spec, const model::Shape& shape);
// Every step's batch is drawn from `lengths` (a named distribution or a
// length table; runtime/length_input.hpp picks one from `--lengths`).
SimResult simulate(const SimulateSpec& spec, const LengthSampler& lengths);
// The summary: header lines and a markdown table, one row per planner
// (ring traffic without the all-to-alls); with cp_algorithm other than
// ring, a line per planner with its CP algorithms and all-to-all traffic.
// The model's line of a report: name, parameters, layers, heads, hidden.
std::string model_line(const model::Shape& shape);
std::string simulate_report(const SimResult& result);
// A row's speedup over `base` (the static grid's row), 0 where either could
// not plan; for simulate's and simulate --pp's rows alike.
template <class Row>
double speedup_over(const Row* base, const Row& row) {
  return base && base->error.empty() && row.error.empty() && row.step_s > 0
             ? base->step_s / row.step_s
             : 0.0;
}
// `text` as one CSV field: commas and newlines become ';'.
std::string csv_field(std::string text);
// CSV: the header line, and one line per planner (for benchmarks).
std::string simulate_csv_header();
std::string simulate_csv_rows(const SimResult& result);

}  // namespace meshloom::plan
