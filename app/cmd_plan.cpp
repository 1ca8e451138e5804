// `meshloom plan`: plan one step from a file of sequence lengths, check the
// plan, print what it predicts, and optionally dump it (JSON, binary), draw it
// next to the static grid's plan (--png), or calibrate the cost model from
// measured micro-batches (--calibrate); with --config and run.backend: cuda,
// the device memory a trainer needs (plan/device_memory.hpp). No MPI.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "app/commands.hpp"
#include "base/check.hpp"
#include "base/strings.hpp"
#include "config/config.hpp"
#include "dataplane/data_plane.hpp"
#include "plan/device_memory.hpp"
#include "plan/lengths.hpp"
#include "plan/plan_io.hpp"
#include "plan/planner.hpp"
#include "plan/simulate.hpp"
#include "roles/doc_source.hpp"

namespace meshloom::app {
namespace {

namespace fs = std::filesystem;

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

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// scripts/plot/plot_plan.py: $MESHLOOM_PLOT_SCRIPT, ./scripts, or beside the build.
std::string plot_script() {
  if (const char* env = std::getenv("MESHLOOM_PLOT_SCRIPT")) return env;
  std::vector<fs::path> tries = {fs::current_path() / "scripts/plot/plot_plan.py"};
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0) {
    exe[n] = '\0';
    const fs::path dir = fs::path(exe).parent_path();
    tries.push_back(dir / "../../scripts/plot/plot_plan.py");
    tries.push_back(dir / "../scripts/plot/plot_plan.py");
  }
  for (const fs::path& p : tries)
    if (fs::exists(p)) return fs::weakly_canonical(p).string();
  throw Error(
      "cannot find scripts/plot/plot_plan.py (run from the repository root, or set "
      "MESHLOOM_PLOT_SCRIPT)");
}

// trainer x time of both plans side by side (scripts/plot/plot_plan.py).
void draw(const plan::Plan& hdp, const plan::Plan& stat, const std::string& png) {
  const std::string stem = fs::path(png).replace_extension("").string();
  plan::write_json(hdp, stem + "." + hdp.planner + ".json");
  plan::write_json(stat, stem + ".static.json");
  const char* py = std::getenv("MESHLOOM_PYTHON");
  const std::string cmd = quote(py ? py : "/usr/bin/python3") + " " + quote(plot_script()) +
                          " plan " + quote(stem + "." + hdp.planner + ".json") + " " +
                          quote(stem + ".static.json") + " -o " + quote(png);
  if (std::system(cmd.c_str()) != 0) throw Error("plotting failed: " + cmd);
  std::printf("chart: %s\n", png.c_str());
}

void print_summary(const plan::Plan& p, double ideal) {
  const plan::PlanStats st = plan::plan_stats(p);
  int64_t tokens = 0;
  for (int64_t L : p.lengths) tokens += L;
  std::printf("planner %s: %d sequences, %s tokens on %d trainers, capacity %s", p.planner.c_str(),
              p.sequences(), plan::format_tokens(tokens).c_str(), p.trainers,
              plan::format_tokens(p.capacity).c_str());
  if (p.static_cp > 0) std::printf(" (grid CP %d x DP %d)", p.static_cp, p.trainers / p.static_cp);
  if (p.static_fallback()) std::printf(" [static fallback: the grid's plan is faster]");
  std::printf("\n  predicted step %s, imbalance %.3f (max/mean), step / ideal %.3f, idle %.1f%%\n",
              human_seconds(st.makespan).c_str(), st.imbalance,
              ideal > 0 ? st.makespan / ideal : 1.0, 100 * st.idle_fraction);
  std::printf(
      "  %lld split sequences (largest group %d), ring traffic %s/step, "
      "micro-batches per trainer %d-%d\n",
      (long long)st.split_sequences, st.max_group, human_bytes(st.comm_bytes).c_str(),
      st.min_micro_batches, st.max_micro_batches);
  std::printf("  planned in %.2f ms; binary plan %s\n", p.planning_seconds * 1e3,
              human_bytes(double(plan::serialize(p).size())).c_str());
}

// --config: the data plane chooses the steps exactly as in training (sources
// opened here, no MPI), and each step is planned with the configured planner
// and with the static baseline, one line per step.
int run_plan_config(const PlanArgs& a) {
  config::Config c = config::load_config(a.config, a.sets);
  if (a.trainers < 1) throw Error("--config needs --trainers T (the trainer count to plan for)");
  std::vector<std::unique_ptr<DocSource>> sources;
  std::vector<int64_t> docs;
  for (const auto& s : c.data.sources) {
    sources.push_back(open_doc_source(s));
    docs.push_back(sources.back()->docs());
  }
  dataplane::DataPlane plane(c, docs,
                             [&](int s, int64_t d) { return sources[size_t(s)]->length(d); });
  plan::Hardware hw;
  hw.flops = c.plan.flops;
  hw.bandwidth = hw.intra_bandwidth = c.plan.bandwidth;
  hw.trainers_per_node = 0;
  plan::CostModel cost = plan::CostModel::from_shape(plan::shape_from_config(c.model), hw);
  if (!c.plan.calibration.empty())
    cost = plan::calibrated(cost, plan::calibrate(plan::read_calibration_csv(c.plan.calibration)));
  const plan::PlannerOptions o = plan::options_from_config(c.plan, a.trainers, c.data.seq_len);
  if (c.run.backend == "cuda") {
    // run.gpu_comm: auto takes NCCL where every trainer has a GPU of its own.
    const bool nccl = c.run.gpu_comm != "mpi";
    const plan::DeviceMemory m = plan::device_memory_for_run(c, a.trainers, nccl);
    std::printf(
        "device memory per trainer (run.backend: cuda, rings over %s): about %s for "
        "micro-batches of up to %lld tokens\n",
        nccl ? "NCCL" : "MPI", m.describe(3).c_str(), (long long)m.input.tokens);
  }
  const std::string other = c.plan.planner == "static" ? "hdp" : "static";
  std::printf("%5s %8s %6s %6s %9s %10s %10s %10s %11s %9s %10s\n", "step", "samples", "split",
              "max k", "micro", "predicted", "imbalance", "ring/step", "plan ms", other.c_str(),
              "speedup");
  int64_t fallbacks = 0;
  for (int64_t step = 0; step < a.steps; ++step) {
    dataplane::StepManifest m = plane.next();
    std::vector<int64_t> lengths;
    for (const auto& p : m.samples) lengths.push_back(p.length);
    const plan::Plan p = plan::make_plan(c.plan.planner, lengths, o, cost);
    const std::string err = p.validate();
    if (!err.empty()) throw Error(strf("step %lld: %s", (long long)step, err.c_str()));
    const plan::Plan q = plan::make_plan(other, lengths, o, cost);
    const plan::PlanStats st = plan::plan_stats(p), sq = plan::plan_stats(q);
    std::printf("%5lld %8zu %6lld %6d %4d-%-4d %10s %10.3f %10s %11.2f %9s %9.2fx%s\n",
                (long long)step, lengths.size(), (long long)st.split_sequences, st.max_group,
                st.min_micro_batches, st.max_micro_batches, human_seconds(st.makespan).c_str(),
                st.imbalance, human_bytes(st.comm_bytes).c_str(), p.planning_seconds * 1e3,
                human_seconds(sq.makespan).c_str(), sq.makespan / std::max(st.makespan, 1e-12),
                p.static_fallback() ? "  static fallback" : "");
    fallbacks += p.static_fallback();
    if (step == 0 && !a.png.empty()) {
      const plan::Plan& hdp = c.plan.planner == "static" ? q : p;
      const plan::Plan& stat = c.plan.planner == "static" ? p : q;
      draw(hdp, stat, a.png);
    }
  }
  if (o.static_fallback && c.plan.planner == "hdp")
    std::printf("static fallback (plan.static_fallback): %lld of %lld steps\n",
                (long long)fallbacks, (long long)a.steps);
  return kExitOk;
}

int run_plan(const PlanArgs& a) {
  if (!a.config.empty()) return run_plan_config(a);
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
  std::vector<int64_t> lengths = plan::read_lengths(a.lengths);
  const int64_t context = a.context.empty() ? 0 : plan::parse_tokens(a.context);
  if (!a.batch.empty()) {
    const plan::LengthSampler s = plan::LengthSampler::empirical(lengths, a.lengths);
    lengths = plan::draw_batch(s, plan::parse_tokens(a.batch),
                               context > 0 ? context : INT64_MAX / 4, a.seed);
  } else if (context > 0) {
    std::vector<int64_t> cut;
    for (int64_t L : lengths)
      for (int64_t left = L; left > 0; left -= context) cut.push_back(std::min(left, context));
    lengths = std::move(cut);
  }
  plan::PlannerOptions o;
  o.trainers = a.trainers;
  o.capacity = plan::parse_tokens(a.capacity);
  o.slack = a.slack;
  o.offload = a.offload;
  o.static_fallback = a.static_fallback;
  o.seq_len_max = !a.seq_len_max.empty() ? plan::parse_tokens(a.seq_len_max) : context;
  const double ideal = plan::ideal_step_time(lengths, o, cost);

  const plan::Plan p = plan::make_plan(a.planner, lengths, o, cost);
  const std::string err = p.validate();
  print_summary(p, ideal);
  if (!err.empty()) {
    std::fprintf(stderr, "meshloom: error: %s\n", err.c_str());
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
    const std::string other_name = a.planner == "static" ? "hdp" : "static";
    const plan::Plan other = plan::make_plan(other_name, lengths, o, cost);
    const std::string other_err = other.validate();
    if (!other_err.empty()) throw Error(other_err);
    print_summary(other, ideal);
    draw(a.planner == "static" ? other : p, a.planner == "static" ? p : other, a.png);
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
  cmd->add_option("--out", a.out, "Write the binary plan (what rank 0 broadcasts)");
  cmd->add_option("--png", a.png,
                  "Draw trainer x time of this plan and the other (hdp vs static) side by side");
  cmd->add_option("--calibrate", a.calibrate,
                  "Fit a, b, g of the cost model to a CSV 'tokens,sum_l2,seconds' of measured "
                  "micro-batches");
  cmd->callback([run] { *run = [] { return run_plan(a); }; });
}

}  // namespace meshloom::app
