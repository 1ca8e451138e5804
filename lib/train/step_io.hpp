// What a trainer's step takes and what it gives back, in the trainer's own
// terms: the job (lib/runtime) builds a StepInput from the batch a trainer
// receives and turns the StepStats into the acknowledgement it sends, so
// that train/ knows nothing of the messages between roles.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/batch.hpp"

namespace meshloom::train {

// A run of `length` consecutive tokens of the step's sample `sample`.
struct SampleRun {
  int32_t sample = 0;
  int64_t length = 0;
};

// One micro-batch: its tokens as the model takes them, where they come from,
// and for a CP ring the group (HDP ranks in ring order) and this member's
// place in it. One member: no ring.
struct MicroInput {
  model::Batch batch;           // tokens, targets, positions, patches, sample per token
  std::vector<SampleRun> runs;  // in token order
  std::vector<int32_t> group;
  int32_t member = 0;
  float offload = 0;    // share of the layers' activations kept in host memory (CUDA)
  int32_t slot = 0;     // its place in the pipeline's 1F1B order (parallel.pp > 1)
  int32_t ulysses = 1;  // the group's Ulysses degree: 1 ring, the group size Ulysses
};

// What the trainer needs of a sample of the step: its source and length.
struct SampleInfo {
  int32_t source = 0;
  int64_t length = 0;
  // Evaluation: predictions at positions >= scored_from are also summed
  // apart (EvalStats::sample_scores); -1: none.
  int64_t scored_from = -1;
};

struct StepInput {
  int64_t step = 0;
  int64_t global_predictions = 0;  // the loss's normalizer, the same on every trainer
  int64_t capacity = 0;            // the plan's tokens per trainer (ring block sizes)
  // Indexed by SampleRun::sample; only the samples this trainer's runs touch
  // need be filled in.
  std::vector<SampleInfo> samples;
  // Every CP group of the step, each member set once, in plan order: every
  // trainer prepares the same group communicators from it, members or not.
  std::vector<std::vector<int32_t>> groups;
  std::vector<MicroInput> micro;
};

// What one step measured on this trainer.
struct StepStats {
  int64_t step = 0;
  int32_t trainer = 0;  // index among all trainers
  // The tokens this trainer reports (one per HDP rank), its predictions and
  // their sum of -log p; the model FLOPs of its share of the step.
  int64_t tokens = 0, predictions = 0;
  double loss_sum = 0, flops = 0;
  double step_seconds = 0, compute_seconds = 0;  // wall time; of it forward + backward
  double grad_norm = 0;  // global, before clipping (the same on every trainer)
  std::string note;      // a line for the log (the device, at the first step)
  // Per micro-batch, kMicroColumns numbers: tokens held, sum over its
  // sequences of L^2/k (its share of attention work), the ring size k, seconds
  // (forward + backward): what the planner's cost model predicts, measured.
  std::vector<double> micro;
  // Per source (index in data.sources), this trainer's sum of -log p and its
  // predictions; empty when the backend gives no per-token losses.
  std::vector<double> source_loss;
  std::vector<int64_t> source_predictions;
  // The step's group communicators (MpiGroupComms::prepare): member sets
  // found in the cache and split, the seconds splitting took; the device
  // memory the CUDA backend's communicators hold, and how many it evicted.
  int64_t group_hits = 0, group_misses = 0, group_device_bytes = 0, group_device_evictions = 0;
  double group_split_seconds = 0;
};
constexpr size_t kMicroColumns = 4;  // numbers per micro-batch in StepStats::micro

// What a forward-only pass over held-out data measured on this trainer
// (Trainer::evaluate). Losses and counts only where this trainer reports
// (TP rank 0 of the last stage: one per HDP rank), as StepStats.
struct EvalStats {
  int64_t tokens = 0, predictions = 0;
  double loss_sum = 0;
  double flops = 0;    // this trainer's share of the forward FLOPs
  double seconds = 0;  // wall time of the pass on this trainer
  // Per source (index in data.sources; sized to the sources where this
  // trainer reports, else empty): sum of -log p and predictions.
  std::vector<double> source_loss;
  std::vector<int64_t> source_predictions;
  // Per position bucket (see Trainer::evaluate): sum of -log p and predictions.
  std::vector<double> position_loss;
  std::vector<int64_t> position_predictions;
  // Per sample of the input (where some sample has scored_from >= 0): the
  // sum of -log p of its scored predictions that this trainer reports.
  std::vector<double> sample_scores;
};

}  // namespace meshloom::train
