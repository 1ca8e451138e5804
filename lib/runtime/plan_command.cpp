#include "runtime/plan_command.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "base/check.hpp"
#include "base/strings.hpp"
#include "config/config.hpp"
#include "data/length_table.hpp"
#include "plan/io/lengths.hpp"
#include "plan/io/plan_io.hpp"
#include "plan/io/summary.hpp"
#include "plan/model_shape.hpp"
#include "plan/pipeline/pp_balance.hpp"
#include "plan/planner.hpp"
#include "plan/simulate/simulate.hpp"
#include "runtime/plan_chart.hpp"
#include "runtime/plan_preview.hpp"

namespace meshloom::runtime {

namespace {

// --pp: each of the trainers is a pipeline of `pp` stages; the batch planned
// by PP-Balance and by round-robin, per pipeline: micro-batches, predicted
// 1F1B time and bubble share (plan/pipeline/pp_balance.hpp).
int plan_pipelines(const PlanRequest& a, const std::vector<int64_t>& lengths,
                   const plan::CostModel& cost) {
  const model::Shape shape = plan::model_shape(a.model);
  plan::PipelineBalanceOptions o;
  o.pipelines = a.trainers;
  o.capacity = plan::parse_tokens(a.capacity);
  o.slack = a.slack;
  const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  if (longest > o.capacity)
    throw Error(
        strf("--pp plans sequences of at most --capacity (%lld) tokens; this batch has "
             "one of %lld (lower --context, or raise --capacity)",
             (long long)o.capacity, (long long)longest));
  const std::vector<int> stages =
      plan::balance_stages(plan::layer_costs(shape, cost), a.pp,
                           plan::MicroBatchLoad::of_lengths(std::vector<int64_t>{o.capacity}));
  const plan::PipelineModel model = plan::pipeline_model(shape, cost, stages);
  std::vector<std::string> split;
  for (int l : stages) split.push_back(std::to_string(l));
  std::printf("%d pipelines of %d stages (layers per stage: %s), %zu sequences\n", o.pipelines,
              a.pp, join(split, " ").c_str(), lengths.size());
  const plan::PipelineBatch balanced = plan::pp_balance(lengths, o, model);
  const plan::PipelineBatch naive = plan::pp_round_robin(lengths, o, model);
  for (const plan::PipelineBatch* b : {&balanced, &naive}) {
    const std::string err = plan::check_pipeline_batch(*b, lengths, o);
    if (!err.empty()) throw Error(b->scheduler + ": " + err);
  }
  std::printf("%8s | %-28s | %-28s\n", "pipeline", "pp-balance: micro  time  bubble",
              "round-robin: micro  time  bubble");
  for (int32_t p = 0; p < o.pipelines; ++p) {
    auto cell = [p](const plan::PipelineBatch& b) {
      return strf("%5d %9s %6.1f%%", b.micro_batches_of(p), human_seconds(b.time(p)).c_str(),
                  100 * b.timing[size_t(p)].bubble());
    };
    std::printf("%8d | %-28s | %-28s\n", p, cell(balanced).c_str(), cell(naive).c_str());
  }
  std::printf("step (slowest pipeline): pp-balance %s, round-robin %s (%.2fx)\n",
              human_seconds(balanced.makespan()).c_str(), human_seconds(naive.makespan()).c_str(),
              naive.makespan() / std::max(balanced.makespan(), 1e-12));
  if (!a.png.empty()) draw_pipelines({&balanced, &naive}, a.png);
  return kExitOk;
}

}  // namespace

int plan_command(const PlanRequest& a) {
  if (!a.config.empty()) {
    preview_plans(
        config::load_config(a.config, a.sets), a.trainers, a.steps,
        [&](const plan::Plan& hdp, const plan::Plan& grid) {
          if (!a.png.empty()) draw(hdp, grid, a.png);
        },
        a.trainers_per_node);
    return kExitOk;
  }
  plan::SimulateSpec hw;
  hw.tp = a.tp;
  hw.gpu_flops = a.tflops * 1e12;
  hw.mfu = a.mfu;
  hw.gpu_bandwidth = a.bandwidth * 1e9;
  hw.nvlink_bandwidth = a.nvlink * 1e9;
  plan::CostModel cost =
      plan::CostModel::from_shape(plan::model_shape(a.model), plan::trainer_hardware(hw));
  if (!a.calibrate.empty()) {
    const plan::Calibration fit = plan::calibrate(plan::read_calibration_csv(a.calibrate));
    std::printf("calibration from %s: %s\n", a.calibrate.c_str(), fit.describe().c_str());
    if (!a.lengths.empty())  // only then is the derived model something it replaces
      std::printf("  replaces the cost derived from --model %s: a=%.4e b=%.4e g=%.4e\n",
                  a.model.c_str(), cost.a, cost.b, cost.g);
    cost = plan::calibrated(cost, fit);
    if (a.lengths.empty()) return kExitOk;
  }
  if (a.lengths.empty()) throw Error("--lengths FILE is required (or --calibrate FILE alone)");
  if (a.trainers < 1) throw Error("--trainers must be at least 1");
  const int64_t context = a.context.empty() ? 0 : plan::parse_tokens(a.context);
  const std::vector<int64_t> lengths =
      plan::batch_from_lengths(data::read_length_table(a.lengths),
                               a.batch.empty() ? 0 : plan::parse_tokens(a.batch), context, a.seed);
  if (a.pp < 1) throw Error("--pp must be at least 1");
  if (a.pp > 1) return plan_pipelines(a, lengths, cost);
  if (a.trainers_per_node > 0) {
    cost.set_nodes(plan::uniform_nodes(a.trainers, a.trainers_per_node));
    std::printf("%d trainers, %d a node: %d nodes\n", a.trainers, a.trainers_per_node,
                (a.trainers + a.trainers_per_node - 1) / a.trainers_per_node);
  }
  plan::PlannerOptions o;
  o.trainers = a.trainers;
  o.capacity = plan::parse_tokens(a.capacity);
  o.slack = a.slack;
  o.offload = a.offload;
  o.static_fallback = a.static_fallback;
  o.cp_algorithm = config::choice_from_name<config::CpAlgorithm>(a.cp_algorithm, "--cp-algorithm");
  o.seq_len_max = !a.seq_len_max.empty() ? plan::parse_tokens(a.seq_len_max) : context;
  const double ideal = plan::ideal_step_time(lengths, o, cost);

  const config::Planner planner = config::choice_from_name<config::Planner>(a.planner, "--planner");
  const plan::Plan p = plan::plan_step({planner}, lengths, o, cost);
  const std::string err = p.validate();
  std::fputs(plan::plan_summary(p, ideal).c_str(), stdout);
  if (!err.empty()) {
    print_error(err);
    return kExitFatal;
  }
  std::fputs(plan::ring_table(p, cost, plan::kRingTableRows).c_str(), stdout);
  std::printf(
      "  plan valid: every token on one trainer, micro-batches within capacity, zigzag "
      "chunks, consistent rings\n");
  if (!a.json.empty()) {
    plan::write_json(p, a.json);
    std::printf("JSON dump: %s\n", a.json.c_str());
  }
  if (!a.out.empty()) {
    const std::vector<uint8_t> bytes = plan::serialize(p);
    std::ofstream f(a.out, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    if (!f) throw Error("cannot write '" + a.out + "'");
    std::printf("binary plan: %s (%zu bytes)\n", a.out.c_str(), bytes.size());
  }
  if (!a.png.empty()) {
    const bool grid = planner == config::Planner::static_grid;
    const plan::Plan other = plan::plan_step(
        {grid ? config::Planner::hdp : config::Planner::static_grid}, lengths, o, cost);
    const std::string other_err = other.validate();
    if (!other_err.empty()) throw Error(other_err);
    std::fputs(plan::plan_summary(other, ideal).c_str(), stdout);
    draw(grid ? other : p, grid ? p : other, a.png);
  }
  return kExitOk;
}

}  // namespace meshloom::runtime
