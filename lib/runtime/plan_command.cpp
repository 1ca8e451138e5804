#include "runtime/plan_command.hpp"

#include <cstdio>
#include <fstream>

#include "base/check.hpp"
#include "config/config.hpp"
#include "data/length_table.hpp"
#include "plan/lengths.hpp"
#include "plan/plan_io.hpp"
#include "plan/planner.hpp"
#include "plan/simulate.hpp"
#include "plan/summary.hpp"
#include "runtime/plan_chart.hpp"
#include "runtime/plan_preview.hpp"

namespace meshloom {

int plan_command(const PlanRequest& a) {
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

}  // namespace meshloom
