// Pipeline parallelism, the planning half: which layers each
// pipeline stage holds, and what one micro-batch costs on each stage.
//
// An HDP rank becomes a pipeline of `pp` stages (each stage a trainer: one
// GPU or a TP group). Stage 0 also holds the embedding, the last stage the
// LM head and the loss; layers are contiguous, every stage holds at least one.
//
// Per-stage cost comes from the shared cost model (cost_model.hpp) cut by
// FLOP shares, so a calibrated a, b carry over:
//   a layer:   b_layer x tokens + (a / layers) x sum L^2
//              b_layer = (b - tp_collectives) x (layer FLOPs / linear FLOPs)
//                        + tp_collectives / layers
//   LM head:   (b - tp_collectives) x (d V / linear FLOPs) per token, plus the
//              softmax cross-entropy, about 5 operations per logit
//   embedding: a gather forward and a scatter-add backward, d per token
// The last two are tiny next to the head's matrix product; they are counted
// so that the first and last stages are never handed a full share of layers
// when a lighter split exists. The fixed per-micro-batch cost g is shared
// evenly by the stages. Forward is 1/3 of a linear cost (backward computes
// two products per forward one) and 1/3.5 of attention (flash attention's
// backward recomputes the scores): the shares CostModel::from_shape uses.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "model/shape.hpp"
#include "plan/cost/cost_model.hpp"

namespace meshloom::plan {

// The work of one micro-batch: tokens, and sum over its sequences of L^2
// (their causal attention, in token^2).
struct MicroBatchLoad {
  double tokens = 0;
  double attn_l2 = 0;
  static MicroBatchLoad of_lengths(std::span<const int64_t> lengths);
};

// Seconds of one piece of the model for a micro-batch, forward + backward.
struct PartCost {
  double per_token = 0;   // seconds per token
  double per_token2 = 0;  // seconds per token^2 of attention
  double fixed = 0;       // seconds per micro-batch
  double seconds(const MicroBatchLoad& m) const {
    return per_token * m.tokens + per_token2 * m.attn_l2 + fixed;
  }
  PartCost& operator+=(const PartCost& o);
};

// The model cut into its parts: every transformer layer costs the same.
struct LayerCosts {
  int layers = 0;
  PartCost embedding;          // on stage 0
  PartCost layer;              // each of the `layers`
  PartCost head;               // LM head and loss, on the last stage
  double per_micro_batch = 0;  // g, shared evenly by the stages
};
LayerCosts layer_costs(const model::Shape& shape, const CostModel& cost);

// Layers per stage (pp entries, each >= 1, summing to layers) that make the
// costliest stage as cheap as possible for micro-batches like `typical`
// (exact: the least bottleneck over all contiguous splits; among those, the
// one with the least sum of squared stage costs, ties to earlier stages
// holding more). Throws Error when pp < 1 or pp > layers.
std::vector<int> balance_stages(const LayerCosts& costs, int pp, const MicroBatchLoad& typical);
// The general form: per-layer costs, extras on the first and last stage.
std::vector<int> partition_layers(std::span<const double> layer, double first_extra,
                                  double last_extra, int pp);
// The run's layers per stage: parallel.stage_layers, else balance_stages()
// for micro-batches of one plan.capacity-token sequence under the config's
// cost model ({n_layers} at pp = 1). Every trainer computes the same.
std::vector<int> stage_layers_for_run(const config::Config& c);
// Checks a user's `parallel.stage_layers`: pp entries, each >= 1, summing to
// the model's layers; throws Error naming the key and what is wrong.
void check_stage_layers(std::span<const int> stage_layers, int layers, int pp);

// One pipeline's stages and the link between neighbours.
struct PipelineModel {
  std::vector<PartCost> stages;    // forward + backward of each stage
  double act_bytes_per_token = 0;  // what one stage sends the next (bf16 [tokens, d])
  double latency = 0;              // seconds per stage-to-stage message
  double bandwidth = 25e9;         // bytes per second of that message
  int pp() const { return int(stages.size()); }
  double forward(int stage, const MicroBatchLoad& m) const;
  double backward(int stage, const MicroBatchLoad& m) const;
  // One activation (forward) or its gradient (backward) between two stages.
  double transfer(const MicroBatchLoad& m) const {
    return latency + m.tokens * act_bytes_per_token / bandwidth;
  }
};
// Stages holding `stage_layers` (check_stage_layers holds); messages use the
// cost model's inter-node bandwidth and latency.
PipelineModel pipeline_model(const model::Shape& shape, const CostModel& cost,
                             std::span<const int> stage_layers);
// Each stage's forward + backward seconds for micro-batches like `m`.
std::vector<double> stage_seconds(const PipelineModel& model, const MicroBatchLoad& m);

// The cost models of a run (config `c`): `hdp_rank`, an HDP rank's (tp x pp
// trainers' FLOPs and links, as the planners take it), and `pipeline`, one
// HDP rank's stages (a stage is a TP group: tp trainers' cost cut by its
// layers; one stage at pp = 1). Both calibrated with plan.calibration when
// it is set; `calibration` then describes the fit, else it is empty.
struct RunCosts {
  CostModel hdp_rank;
  PipelineModel pipeline;
  std::string calibration;
};
RunCosts run_costs(const config::Config& c);

}  // namespace meshloom::plan
