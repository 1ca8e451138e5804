#include "plan/pipeline/pipeline.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/check.hpp"
#include "base/strings.hpp"
#include "plan/cost/model_cost.hpp"
#include "plan/model_shape.hpp"

namespace meshloom::plan {

namespace {

// Forward shares of a forward + backward cost (see the header).
constexpr double kLinearForward = 1.0 / 3.0;
constexpr double kAttentionForward = 1.0 / 3.5;
constexpr double kFixedForward = 0.5;
// Softmax cross-entropy, forward and backward: operations per logit.
constexpr double kLossOpsPerLogit = 5.0;

double forward_share(const PartCost& c, const MicroBatchLoad& m) {
  return kLinearForward * c.per_token * m.tokens + kAttentionForward * c.per_token2 * m.attn_l2 +
         kFixedForward * c.fixed;
}

// x < y by more than rounding.
bool clearly_less(double x, double y) { return x < y - 1e-12 * std::max(std::fabs(y), 1e-300); }

}  // namespace

MicroBatchLoad MicroBatchLoad::of_lengths(std::span<const int64_t> lengths) {
  MicroBatchLoad m;
  for (int64_t L : lengths) {
    m.tokens += double(L);
    m.attn_l2 += double(L) * double(L);
  }
  return m;
}

PartCost& PartCost::operator+=(const PartCost& o) {
  per_token += o.per_token;
  per_token2 += o.per_token2;
  fixed += o.fixed;
  return *this;
}

LayerCosts layer_costs(const model::Shape& shape, const CostModel& cost) {
  ML_CHECK(shape.n_layers >= 1 && shape.n_layers == cost.layers,
           strf("the shape has %d layers, the cost model %d", int(shape.n_layers), cost.layers));
  const double linear = linear_flops_per_token(shape);
  const double head_flops = 2.0 * double(shape.d_model) * double(shape.vocab);
  const double layer_flops = (linear - head_flops) / shape.n_layers;
  // Seconds per forward FLOP with its backward (b = 3 x linear FLOPs / rate).
  const double per_flop = (cost.b - cost.tp_seconds_per_token) / linear;
  const double per_op = per_flop / 3.0;  // an element-wise operation, done once
  LayerCosts c;
  c.layers = shape.n_layers;
  c.layer.per_token = per_flop * layer_flops + cost.tp_seconds_per_token / shape.n_layers;
  c.layer.per_token2 = cost.a / shape.n_layers;
  c.head.per_token = per_flop * head_flops + per_op * kLossOpsPerLogit * double(shape.vocab);
  c.embedding.per_token = per_op * double(shape.d_model);
  c.per_micro_batch = cost.g;
  return c;
}

std::vector<int> partition_layers(std::span<const double> layer, double first_extra,
                                  double last_extra, int pp) {
  const int L = int(layer.size());
  if (pp < 1 || pp > L)
    throw Error(
        strf("cannot cut %d layers into %d pipeline stages (parallel.pp must be 1..%d)", L, pp, L));
  std::vector<double> prefix(L + 1, 0.0);
  for (int i = 0; i < L; ++i) prefix[i + 1] = prefix[i] + layer[i];
  // Cost of stage s holding layers [i, j).
  auto stage = [&](int s, int i, int j) {
    return prefix[j] - prefix[i] + (s == 0 ? first_extra : 0) + (s == pp - 1 ? last_extra : 0);
  };
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // Pass 1: the least bottleneck. neck[s][j]: stages 0..s-1 over layers [0, j).
  std::vector<std::vector<double>> neck(pp + 1, std::vector<double>(L + 1, kInf));
  neck[0][0] = 0;
  for (int s = 1; s <= pp; ++s)
    for (int j = s; j <= L - (pp - s); ++j)
      for (int i = s - 1; i < j; ++i)
        neck[s][j] = std::min(neck[s][j], std::max(neck[s - 1][i], stage(s - 1, i, j)));
  const double bound = neck[pp][L] * (1 + 1e-12);
  // Pass 2: under that bottleneck, the least sum of squares; ties go to the
  // split whose last stage starts latest (earlier stages hold more).
  std::vector<std::vector<double>> sq(pp + 1, std::vector<double>(L + 1, kInf));
  std::vector<std::vector<int>> from(pp + 1, std::vector<int>(L + 1, -1));
  sq[0][0] = 0;
  for (int s = 1; s <= pp; ++s)
    for (int j = s; j <= L - (pp - s); ++j)
      for (int i = j - 1; i >= s - 1; --i) {
        const double c = stage(s - 1, i, j);
        if (c > bound || sq[s - 1][i] == kInf) continue;
        const double v = sq[s - 1][i] + c * c;
        if (from[s][j] < 0 || clearly_less(v, sq[s][j])) {
          sq[s][j] = v;
          from[s][j] = i;
        }
      }
  ML_CHECK(from[pp][L] >= 0, "no stage split meets the least bottleneck");
  std::vector<int> counts(pp);
  for (int s = pp, j = L; s >= 1; --s) {
    const int i = from[s][j];
    counts[s - 1] = j - i;
    j = i;
  }
  return counts;
}

std::vector<int> balance_stages(const LayerCosts& costs, int pp, const MicroBatchLoad& typical) {
  const std::vector<double> layer(costs.layers, costs.layer.seconds(typical));
  return partition_layers(layer, costs.embedding.seconds(typical), costs.head.seconds(typical), pp);
}

std::vector<int> stage_layers_for_run(const config::Config& c) {
  const int pp = int(c.parallel.pp);
  if (!c.parallel.stage_layers.empty()) {
    std::vector<int> given(c.parallel.stage_layers.begin(), c.parallel.stage_layers.end());
    check_stage_layers(given, int(c.model.n_layers), pp);
    return given;
  }
  if (pp == 1) return {int(c.model.n_layers)};
  const model::Shape shape = shape_from_config(c);
  const CostModel cost =
      CostModel::from_shape(shape, hardware_from_config(c.plan, int(c.parallel.tp)));
  return balance_stages(layer_costs(shape, cost), pp,
                        MicroBatchLoad::of_lengths(std::vector<int64_t>{c.plan.capacity}));
}

RunCosts run_costs(const config::Config& c) {
  const model::Shape shape = shape_from_config(c);
  const int tp = int(c.parallel.tp), pp = int(c.parallel.pp);
  RunCosts out;
  out.hdp_rank = CostModel::from_shape(shape, hardware_from_config(c.plan, tp * pp));
  out.hdp_rank.heads = head_shape(shape, tp);  // stages split layers, not heads
  CostModel stage = CostModel::from_shape(shape, hardware_from_config(c.plan, tp));
  if (!c.plan.calibration.empty()) {
    const Calibration fit = calibrate(read_calibration_csv(c.plan.calibration));
    out.hdp_rank = calibrated(out.hdp_rank, fit);
    stage = calibrated(stage, fit);
    out.calibration = fit.describe();
  }
  out.pipeline = pipeline_model(shape, stage, stage_layers_for_run(c));
  return out;
}

void check_stage_layers(std::span<const int> stage_layers, int layers, int pp) {
  if (int(stage_layers.size()) != pp)
    throw Error(
        strf("parallel.stage_layers has %zu entries, but parallel.pp is %d: give one "
             "layer count per stage",
             stage_layers.size(), pp));
  int64_t sum = 0;
  for (size_t s = 0; s < stage_layers.size(); ++s) {
    if (stage_layers[s] < 1)
      throw Error(strf("parallel.stage_layers[%zu] is %d: every stage needs at least one layer", s,
                       stage_layers[s]));
    sum += stage_layers[s];
  }
  if (sum != layers)
    throw Error(
        strf("parallel.stage_layers sums to %lld layers, but the model has %d "
             "(model.n_layers)",
             (long long)sum, layers));
}

double PipelineModel::forward(int stage, const MicroBatchLoad& m) const {
  return forward_share(stages[stage], m);
}

double PipelineModel::backward(int stage, const MicroBatchLoad& m) const {
  return stages[stage].seconds(m) - forward_share(stages[stage], m);
}

PipelineModel pipeline_model(const model::Shape& shape, const CostModel& cost,
                             std::span<const int> stage_layers) {
  const int pp = int(stage_layers.size());
  check_stage_layers(stage_layers, shape.n_layers, pp);
  const LayerCosts c = layer_costs(shape, cost);
  PipelineModel m;
  m.stages.resize(pp);
  for (int s = 0; s < pp; ++s) {
    PartCost& st = m.stages[s];
    for (int l = 0; l < stage_layers[s]; ++l) st += c.layer;
    if (s == 0) st += c.embedding;
    if (s == pp - 1) st += c.head;
    st.fixed += c.per_micro_batch / pp;
  }
  m.act_bytes_per_token = 2.0 * double(shape.d_model);
  m.latency = cost.latency;
  m.bandwidth = cost.bandwidth;
  return m;
}

std::vector<double> stage_seconds(const PipelineModel& model, const MicroBatchLoad& m) {
  std::vector<double> out;
  for (const PartCost& st : model.stages) out.push_back(st.seconds(m));
  return out;
}

}  // namespace meshloom::plan
