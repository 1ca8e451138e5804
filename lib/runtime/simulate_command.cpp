#include "runtime/simulate_command.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>

#include "base/check.hpp"
#include "base/strings.hpp"
#include "plan/cost/checkpoint_cost.hpp"
#include "plan/io/lengths.hpp"
#include "plan/model_shape.hpp"
#include "plan/simulate/simulate_pipeline.hpp"
#include "runtime/length_input.hpp"
#include "runtime/plan_chart.hpp"

namespace meshloom::runtime {

namespace {

// Appends `rows` to `path` ("" : nothing), the header first into a new file.
void append_csv(const std::string& path, const std::string& header, const std::string& rows) {
  if (path.empty()) return;
  const bool fresh = !std::filesystem::exists(path);
  std::ofstream out(path, std::ios::app);
  if (fresh) out << header;
  out << rows;
  if (!out) throw Error("cannot write '" + path + "'");
}

// --pp: the three pipeline setups on the same batches (plan/simulate/simulate_pipeline.hpp).
// --pp N (auto: 0).
int parse_pp(const std::string& pp_text) {
  if (pp_text == "auto") return 0;
  int pp = 0;
  const auto [end, ec] = std::from_chars(pp_text.data(), pp_text.data() + pp_text.size(), pp);
  if (ec != std::errc() || end != pp_text.data() + pp_text.size() || pp < 1)
    throw Error("--pp '" + pp_text + "': give a number of stages >= 1, or auto");
  return pp;
}

int simulate_pipelines(const plan::SimulateSpec& s, const std::string& pp_text,
                       const std::string& lengths, const std::string& csv) {
  const int pp = parse_pp(pp_text);
  const plan::PipeSimResult r = plan::simulate_pipelines(s, length_sampler(lengths), pp);
  std::fputs(plan::pipeline_report(r).c_str(), stdout);
  append_csv(csv, plan::pipeline_csv_header(), plan::pipeline_csv_rows(r));
  for (const plan::PipeSimRow& row : r.rows)
    if (row.error.empty()) return kExitOk;
  return kExitBadInput;
}

// --png draws a planner's step 0 beside the static grid's: hdp, else the
// first other planner named. Checked before simulating, which takes minutes
// at scale.
config::Planner planner_to_draw(const std::vector<config::Planner>& planners) {
  std::optional<config::Planner> other;
  bool grid = false;
  for (config::Planner p : planners) {
    grid |= p == config::Planner::static_grid;
    if (p != config::Planner::static_grid && (!other || p == config::Planner::hdp)) other = p;
  }
  if (!grid || !other)
    throw Error(
        "--png draws a planner beside the static grid: --planners must name static "
        "and another");
  return *other;
}

void draw_first_step(const plan::SimResult& r, config::Planner planner, const std::string& png) {
  const plan::SimRow* drawn = r.row(planner);
  const plan::SimRow* grid = r.row(config::Planner::static_grid);
  for (const plan::SimRow* row : {drawn, grid})
    if (!row->first)
      throw Error(std::string("--png: ") + config::enum_name(row->planner) +
                  " could not plan: " + row->error);
  draw(*drawn->first, *grid->first, png);
}

// The spec in the planner's units (bytes, FLOP/s, seconds) from the CLI's.
plan::SimulateSpec spec_of(const SimulateRequest& request) {
  plan::SimulateSpec s = request.spec;
  s.context = plan::parse_tokens(request.context);
  s.batch = plan::parse_tokens(request.batch);
  s.capacity = request.capacity == "auto" ? 0 : plan::parse_tokens(request.capacity);
  s.gpu_memory = request.gpu_memory * 1e9;
  if (request.trainers > 0) s.gpus = request.trainers * s.tp;
  s.gpu_flops = request.tflops * 1e12;
  s.gpu_bandwidth = request.bandwidth * 1e9;
  s.nvlink_bandwidth = request.nvlink * 1e9;
  s.latency = request.latency_us * 1e-6;
  s.host_bandwidth = request.host * 1e9;
  s.host_memory = request.host_memory * 1e9;
  s.micro_batch_overhead = request.mb_ms * 1e-3;
  s.validate = !request.no_validate;
  s.planners.clear();
  for (const std::string& name : split(request.planners, ','))
    s.planners.push_back(config::choice_from_name<config::Planner>(name, "--planners"));
  s.cp_algorithm =
      config::choice_from_name<config::CpAlgorithm>(request.cp_algorithm, "--cp-algorithm");
  return s;
}

// --checkpoint-fs: the checkpoint model on the same machine and model.
int checkpoint_model(const SimulateRequest& request, const plan::SimulateSpec& s) {
  plan::CheckpointSetup c;
  c.model = plan::model_shape(s.model);
  c.gpus = s.gpus;
  c.tp = s.tp;
  if (!request.pp.empty()) c.pp = std::max(1, parse_pp(request.pp));
  c.fs_bandwidth = request.checkpoint_fs * 1e9;
  c.writer_bandwidth = request.checkpoint_writer * 1e9;
  c.network_bandwidth = s.gpu_bandwidth;
  c.host_bandwidth = s.host_bandwidth;
  std::fputs(plan::checkpoint_report(c, plan::checkpoint_costs(c)).c_str(), stdout);
  return kExitOk;
}

}  // namespace

int simulate_command(const SimulateRequest& request) {
  plan::SimulateSpec s = spec_of(request);
  if (request.checkpoint_fs > 0) return checkpoint_model(request, s);
  if (!request.pp.empty()) {
    if (!request.png.empty()) throw Error("--png draws HDP against the static grid, not --pp");
    return simulate_pipelines(s, request.pp, request.lengths, request.csv);
  }
  const config::Planner drawn =
      request.png.empty() ? config::Planner::hdp : planner_to_draw(s.planners);
  s.keep_first = !request.png.empty();
  const plan::SimResult r = plan::simulate(s, length_sampler(request.lengths));
  std::fputs(plan::simulate_report(r).c_str(), stdout);
  const plan::SimRow* hdp = r.row(config::Planner::hdp);
  const plan::SimRow* bs = r.row(config::Planner::bytescale);
  if (hdp && bs && hdp->error.empty() && bs->error.empty() && hdp->step_s > 0)
    std::printf("\nhdp over ByteScale's Alg. 2 balance: %.3fx\n", bs->step_s / hdp->step_s);
  append_csv(request.csv, plan::simulate_csv_header(), plan::simulate_csv_rows(r));
  if (!request.png.empty()) draw_first_step(r, drawn, request.png);
  int bad = 0;
  for (const plan::SimRow& row : r.rows) bad += !row.error.empty();
  return bad == int(r.rows.size()) ? kExitBadInput : kExitOk;
}

}  // namespace meshloom::runtime
