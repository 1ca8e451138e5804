// `meshloom plan`: plan one step from a file of sequence lengths, check the
// plan, print what it predicts, and optionally dump it (JSON, binary), draw it
// next to the static grid's plan (--png), or calibrate the cost model from
// measured micro-batches (--calibrate); with --config and run.backend: cuda,
// the device memory a trainer needs (plan/device_memory.hpp). No MPI.
#include <cstdio>
#include <fstream>

#include "app/commands.hpp"
#include "app/plan_chart.hpp"
#include "base/check.hpp"
#include "config/config.hpp"
#include "data/length_table.hpp"
#include "plan/lengths.hpp"
#include "plan/plan_io.hpp"
#include "plan/planner.hpp"
#include "plan/simulate.hpp"
#include "plan/summary.hpp"
#include "runtime/plan_preview.hpp"

namespace meshloom::app {
namespace {

struct PlanArgs {
  std::string lengths;
  int trainers = 0;
  std::string capacity = "8K";
  std::string planner = "hdp";
  std::string model = "llama-7b";
  std::string batch, context, seq_len_max;
  uint64_t seed = 1;
  double slack = 0.02;
  bool offload = false;
  bool static_fallback = false;
  int tp = 1;
  double tflops = 312, mfu = 0.45, bandwidth = 25, nvlink = 150;
  std::string json, out, png, calibrate;
  std::string config;  // plan the real data plane's steps instead of --lengths
  std::vector<std::string> sets;
  int64_t steps = 10;
};

int run_plan(const PlanArgs& a) {
  if (!a.config.empty()) {
    preview_plans(config::load_config(a.config, a.sets), a.trainers, a.steps,
                  [&](const plan::Plan& hdp, const plan::Plan& grid) {
                    if (!a.png.empty()) draw(hdp, grid, a.png);
                  });
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
  plan::PlannerOptions o;
  o.trainers = a.trainers;
  o.capacity = plan::parse_tokens(a.capacity);
  o.slack = a.slack;
  o.offload = a.offload;
  o.static_fallback = a.static_fallback;
  o.seq_len_max = !a.seq_len_max.empty() ? plan::parse_tokens(a.seq_len_max) : context;
  const double ideal = plan::ideal_step_time(lengths, o, cost);

  const config::Planner planner = config::choice_from_name<config::Planner>(a.planner, "--planner");
  const plan::Plan p = plan::make_plan(planner, lengths, o, cost);
  const std::string err = p.validate();
  std::fputs(plan::plan_summary(p, ideal).c_str(), stdout);
  if (!err.empty()) {
    print_error(err);
    return kExitFatal;
  }
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
    const plan::Plan other = plan::make_plan(
        grid ? config::Planner::hdp : config::Planner::static_grid, lengths, o, cost);
    const std::string other_err = other.validate();
    if (!other_err.empty()) throw Error(other_err);
    std::fputs(plan::plan_summary(other, ideal).c_str(), stdout);
    draw(grid ? other : p, grid ? p : other, a.png);
  }
  return kExitOk;
}

}  // namespace

void add_plan(CLI::App& app, Runner* run) {
  static PlanArgs a;
  CLI::App* cmd =
      app.add_subcommand("plan", "Plan one step from a file of sequence lengths and check it");
  cmd->add_option("--config,-c", a.config,
                  "Plan the steps the data plane of this experiment chooses (needs --trainers)");
  cmd->add_option("--set", a.sets, "Override a config key (repeatable)");
  cmd->add_option("--steps", a.steps, "Steps to plan with --config")
      ->check(at_least_one())
      ->capture_default_str();
  cmd->add_option("--lengths", a.lengths,
                  "Lengths: .tsv with a gpt2_tokens column, one per line, or .idx");
  cmd->add_option("--trainers,-T", a.trainers, "Trainers");
  cmd->add_option("--capacity,-C", a.capacity, "Tokens one trainer holds in a micro-batch")
      ->capture_default_str();
  cmd->add_option("--planner", a.planner, "hdp, bytescale, naive or static")->capture_default_str();
  cmd->add_option("--model", a.model, "Model shape for the cost model")->capture_default_str();
  cmd->add_option("--batch", a.batch,
                  "Draw a global batch of this many tokens from the file (default: the file's "
                  "lengths are the batch)");
  cmd->add_option("--context", a.context, "Cut longer sequences into pieces of this length");
  cmd->add_option("--seq-len-max", a.seq_len_max,
                  "Longest sequence the run allows (static CP; default: --context or the batch's)");
  cmd->add_option("--seed", a.seed, "Seed for --batch")->capture_default_str();
  cmd->add_option("--slack", a.slack, "Balance scheduler slack delta")->capture_default_str();
  cmd->add_flag("--offload", a.offload, "Selective activation offloading");
  cmd->add_flag("--static-fallback", a.static_fallback,
                "hdp: use the static grid's plan where it is predicted faster "
                "(plan.static_fallback)");
  cmd->add_option("--tp", a.tp, "Tensor-parallel GPUs per trainer")->capture_default_str();
  cmd->add_option("--gpu-tflops", a.tflops, "Peak TFLOP/s per GPU")->capture_default_str();
  cmd->add_option("--mfu", a.mfu, "Share of the peak reached")->capture_default_str();
  cmd->add_option("--bandwidth", a.bandwidth, "GB/s per GPU across nodes")->capture_default_str();
  cmd->add_option("--nvlink", a.nvlink, "GB/s per GPU inside a node")->capture_default_str();
  cmd->add_option("--json", a.json, "Write the plan as readable JSON");
  cmd->add_option("--out", a.out, "Write the binary plan (plan/plan_io.hpp)");
  cmd->add_option("--png", a.png,
                  "Draw trainer x time of this plan and the other (hdp vs static) side by side");
  cmd->add_option("--calibrate", a.calibrate,
                  "Fit a, b, g of the cost model to a CSV 'tokens,sum_l2,seconds' of measured "
                  "micro-batches");
  cmd->callback([run] { *run = [] { return run_plan(a); }; });
}

}  // namespace meshloom::app
