// `meshloom simulate`: HDP against the static DP x CP grid at cluster scale,
// with no data, no MPI and no GPU. Batches are drawn from a named length
// distribution (byted, github, ...) or a lengths file, every planner plans the
// same batch, and the cost model predicts each step (lib/plan/simulate/simulate.hpp).
// With --pp, HDP ranks are pipelines and the static 3D mesh, DP-Balance and
// PP-Balance are compared instead (lib/plan/simulate/simulate_pipeline.hpp). --png
// draws step 0 as `plan --png` draws its batch (runtime/plan_chart.hpp).
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>

#include "app/commands.hpp"
#include "base/check.hpp"
#include "base/strings.hpp"
#include "plan/io/lengths.hpp"
#include "plan/model_shape.hpp"
#include "plan/simulate/simulate.hpp"
#include "plan/simulate/simulate_pipeline.hpp"
#include "runtime/length_input.hpp"
#include "runtime/plan_chart.hpp"

namespace meshloom::app {

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
int simulate_pipelines(const plan::SimulateSpec& s, const std::string& pp_text,
                       const std::string& lengths, const std::string& csv) {
  int pp = 0;
  if (pp_text != "auto") {
    const auto [end, ec] = std::from_chars(pp_text.data(), pp_text.data() + pp_text.size(), pp);
    if (ec != std::errc() || end != pp_text.data() + pp_text.size() || pp < 1)
      throw Error("--pp '" + pp_text + "': give a number of stages >= 1, or auto");
  }
  const plan::PipeSimResult r = plan::simulate_pipelines(s, runtime::length_sampler(lengths), pp);
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
  runtime::draw(*drawn->first, *grid->first, png);
}

}  // namespace

void add_simulate(CLI::App& app, Runner* run) {
  struct Args {
    plan::SimulateSpec spec;
    int trainers = 0;
    std::string context = "2M", batch = "32M", capacity = "8K";
    std::string lengths = "byted";
    double tflops = 312, bandwidth = 25, nvlink = 150, latency_us = 10, host = 20, mb_ms = 0;
    double host_memory = 256, gpu_memory = 80;
    std::string planners = "static,naive,bytescale,hdp";
    std::string csv;
    std::string pp;
    std::string png;
    std::string cp_algorithm = "ring";
    bool no_validate = false;
  };
  static Args a;
  CLI::App* cmd = app.add_subcommand(
      "simulate",
      "Predict step time of HDP and the static DP x CP grid at cluster scale (no data)");
  cmd->add_option("--model", a.spec.model, "Model shape: " + join(plan::model_shape_names(), ", "))
      ->capture_default_str();
  cmd->add_option("--gpus", a.spec.gpus, "GPUs (trainers x TP)")->capture_default_str();
  cmd->add_option("--trainers,-T", a.trainers, "Trainers (overrides --gpus: GPUs = T x TP)");
  cmd->add_option("--tp", a.spec.tp, "Tensor-parallel GPUs per trainer")->capture_default_str();
  cmd->add_option("--gpus-per-node", a.spec.gpus_per_node, "GPUs per node (NVLink domain)")
      ->capture_default_str();
  cmd->add_option("--context", a.context, "Longest sample, tokens (256K-2M; sets the static CP)")
      ->capture_default_str();
  cmd->add_option("--batch", a.batch, "Global batch, tokens")->capture_default_str();
  cmd->add_option("--capacity,-C", a.capacity,
                  "Tokens one trainer holds in a micro-batch, or auto: what fits the GPU's "
                  "memory at this TP (--gpu-memory)")
      ->capture_default_str();
  cmd->add_option("--gpu-memory", a.gpu_memory, "GB of memory per GPU (--capacity auto)")
      ->capture_default_str();
  cmd->add_option("--lengths", a.lengths,
                  "Length distribution (byted, github, fixed:N, loguniform:A:B) or a lengths "
                  "file (.tsv with gpt2_tokens, one per line, or .idx)")
      ->capture_default_str();
  cmd->add_option("--gpu-tflops", a.tflops, "Peak dense BF16 TFLOP/s per GPU")
      ->capture_default_str();
  cmd->add_option("--mfu", a.spec.mfu, "Share of the peak the kernels reach")
      ->capture_default_str();
  cmd->add_option("--bandwidth", a.bandwidth, "GB/s per GPU across nodes")->capture_default_str();
  cmd->add_option("--nvlink", a.nvlink, "GB/s per GPU inside a node")->capture_default_str();
  cmd->add_option("--latency-us", a.latency_us, "Microseconds per ring message")
      ->capture_default_str();
  cmd->add_option("--host-bandwidth", a.host, "GB/s per GPU to host memory (offloading)")
      ->capture_default_str();
  cmd->add_option("--host-memory", a.host_memory, "GB of pinned host memory per GPU (offloading)")
      ->capture_default_str();
  cmd->add_option("--mb-overhead-ms", a.mb_ms, "Fixed milliseconds per micro-batch")
      ->capture_default_str();
  cmd->add_option("--steps", a.spec.steps, "Batches to draw and average over")
      ->capture_default_str();
  cmd->add_option("--seed", a.spec.seed, "Seed of the batches")->capture_default_str();
  cmd->add_option("--slack", a.spec.slack, "Balance scheduler slack delta")->capture_default_str();
  cmd->add_flag("--offload", a.spec.offload, "Selective activation offloading (ByteScale eq. 3)");
  cmd->add_flag("--static-fallback", a.spec.static_fallback,
                "hdp takes the static grid's plan on steps where it is predicted faster "
                "(plan.static_fallback)");
  cmd->add_option("--cp-algorithm", a.cp_algorithm,
                  "How split sequences run attention: ring, ulysses, hybrid or auto (the "
                  "cheapest per group; plan.cp_algorithm)")
      ->capture_default_str();
  cmd->add_option("--planners", a.planners, "Planners to compare (comma-separated)")
      ->capture_default_str();
  cmd->add_option("--pp", a.pp,
                  "Pipeline stages per HDP rank (N, or auto: the smallest that fits): compare "
                  "the static 3D mesh, HDP with DP-Balance and HDP with PP-Balance instead");
  cmd->add_option("--csv", a.csv, "Append one CSV line per planner (or --pp setup) to this file");
  cmd->add_option("--png", a.png,
                  "Draw trainer x time of step 0: hdp (or the other planner) beside the static "
                  "grid (not with --pp)");
  cmd->add_flag("--no-validate", a.no_validate, "Skip validate() of every plan");
  cmd->callback([run] {
    *run = [] {
      plan::SimulateSpec s = a.spec;
      s.context = plan::parse_tokens(a.context);
      s.batch = plan::parse_tokens(a.batch);
      s.capacity = a.capacity == "auto" ? 0 : plan::parse_tokens(a.capacity);
      s.gpu_memory = a.gpu_memory * 1e9;
      if (a.trainers > 0) s.gpus = a.trainers * s.tp;
      s.gpu_flops = a.tflops * 1e12;
      s.gpu_bandwidth = a.bandwidth * 1e9;
      s.nvlink_bandwidth = a.nvlink * 1e9;
      s.latency = a.latency_us * 1e-6;
      s.host_bandwidth = a.host * 1e9;
      s.host_memory = a.host_memory * 1e9;
      s.micro_batch_overhead = a.mb_ms * 1e-3;
      s.validate = !a.no_validate;
      s.planners.clear();
      for (const std::string& name : split(a.planners, ','))
        s.planners.push_back(config::choice_from_name<config::Planner>(name, "--planners"));
      s.cp_algorithm =
          config::choice_from_name<config::CpAlgorithm>(a.cp_algorithm, "--cp-algorithm");
      if (!a.pp.empty()) {
        if (!a.png.empty()) throw Error("--png draws HDP against the static grid, not --pp");
        return simulate_pipelines(s, a.pp, a.lengths, a.csv);
      }
      const config::Planner drawn =
          a.png.empty() ? config::Planner::hdp : planner_to_draw(s.planners);
      s.keep_first = !a.png.empty();
      const plan::SimResult r = plan::simulate(s, runtime::length_sampler(a.lengths));
      std::fputs(plan::simulate_report(r).c_str(), stdout);
      const plan::SimRow* hdp = r.row(config::Planner::hdp);
      const plan::SimRow* bs = r.row(config::Planner::bytescale);
      if (hdp && bs && hdp->error.empty() && bs->error.empty() && hdp->step_s > 0)
        std::printf("\nhdp over ByteScale's Alg. 2 balance: %.3fx\n", bs->step_s / hdp->step_s);
      append_csv(a.csv, plan::simulate_csv_header(), plan::simulate_csv_rows(r));
      if (!a.png.empty()) draw_first_step(r, drawn, a.png);
      int bad = 0;
      for (const plan::SimRow& row : r.rows) bad += !row.error.empty();
      return bad == int(r.rows.size()) ? kExitBadInput : kExitOk;
    };
  });
}

}  // namespace meshloom::app
