// The 1F1B pipeline schedule and its event-driven simulation.
//
// One pipeline of pp stages runs M micro-batches (M may be below pp, and
// pipelines of one step may run different M). Stage s runs, in order:
//   warm-up    F(0) .. F(w-1), w = min(pp - s - 1, M)
//   steady     F(w + j), B(j) for j = 0 .. M - w - 1   (one forward, one backward)
//   cool-down  the backwards left, B(M - w) .. B(M - 1)
// so the last stage alternates from the start and stage 0 holds at most pp
// micro-batches' activations (PipeDream-Flush, Narayanan et al. 2021).
//
// The simulation runs each stage's ops in list order, an op starting when
// its stage is free and its inputs are there:
//   F(i) on s > 0 needs F(i) on s - 1 plus one message;
//   B(i) on s < pp - 1 needs B(i) on s + 1 plus one message, and F(i) on s.
// A message (activation forward, its gradient backward) takes
// latency + bytes / bandwidth and overlaps compute on both ends (sends are
// asynchronous and links never contend). Any op list may be simulated: one
// where no stage can run its next op while some remain deadlocks, and that
// is reported as an Error naming the stuck ops, never looped on.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "plan/pipeline/pipeline.hpp"
#include "plan/plan.hpp"

namespace meshloom::plan {

struct PipeOp {
  bool backward = false;
  int32_t micro_batch = 0;
  bool operator==(const PipeOp&) const = default;
};
std::string to_string(const PipeOp& op);  // "F3", "B0"

// Each stage's ops in execution order.
using PipeSchedule = std::vector<std::vector<PipeOp>>;
PipeSchedule one_f_one_b(int pp, int micro_batches);

// "" when every stage's activations leave in the order the next stage
// takes them and every gradient likewise backward (point-to-point messages
// on one channel per neighbour pair then match without tags), else what
// differs first. Also checks each stage runs F(i) and B(i) once for each i.
std::string check_message_order(const PipeSchedule& schedule, int micro_batches);

// Seconds of every op: forward[s][i], backward[s][i], and transfer[i] for
// one message of micro-batch i between any two neighbouring stages.
struct PipeCosts {
  std::vector<std::vector<double>> forward;
  std::vector<std::vector<double>> backward;
  std::vector<double> transfer;
  int pp() const { return int(forward.size()); }
  int micro_batches() const { return int(transfer.size()); }
};
PipeCosts pipe_costs(const PipelineModel& model, std::span<const MicroBatchLoad> micro_batches);

struct OpTime {
  double start = 0;
  double end = 0;
};

struct PipeTiming {
  double makespan = 0;
  std::vector<double> busy;              // per stage: seconds computing
  std::vector<std::vector<OpTime>> ops;  // per stage, in schedule order
  // Share of stage time idle: 1 - sum(busy) / (pp x makespan); 0 when empty.
  double bubble() const;
};

// Simulates `schedule` with `costs`; throws Error on a deadlock, or when an
// op names a micro-batch outside the costs.
PipeTiming simulate_pipeline(const PipeSchedule& schedule, const PipeCosts& costs);
// 1F1B of these micro-batches, in this order, on `model`.
PipeTiming simulate_one_f_one_b(const PipelineModel& model,
                                std::span<const MicroBatchLoad> micro_batches);

// A micro-batch of `plan` as the load of one pipeline: its tokens, and as
// attention everything of its predicted time under `cost` (the plan's) that
// is not linear (attention, and for a ring the K/V transfers the ring cannot
// hide), so each stage pays that in proportion to its layers (every layer
// runs its own ring).
MicroBatchLoad pipeline_load(const Plan& plan, const MicroBatch& mb, const CostModel& cost);
// Every HDP rank's micro-batches of `plan`, in its order, as pipeline loads.
std::vector<std::vector<MicroBatchLoad>> plan_loads(const Plan& plan, const CostModel& cost);
// The least makespan any schedule could reach: the longest micro-batch's
// chain through every stage and back (with its messages), and the busiest
// stage's total work.
double pipeline_lower_bound(const PipeCosts& costs);

}  // namespace meshloom::plan
