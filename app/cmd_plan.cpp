// `meshloom plan`: the options; the command is runtime/plan_command.hpp.
#include "app/commands.hpp"
#include "runtime/plan_command.hpp"

namespace meshloom::app {

void add_plan(CLI::App& app, Runner* run) {
  static runtime::PlanRequest a;
  CLI::App* cmd =
      app.add_subcommand("plan",
                         "Plan the steps a config's data plane chooses (--config), or one step "
                         "from a file of sequence lengths (--lengths), and check the plans");
  cmd->add_option("--config,-c", a.config,
                  "Plan the steps the data plane of this experiment chooses (needs --trainers)");
  cmd->add_option("--set", a.sets, "Override a config key (repeatable)");
  cmd->add_option("--steps", a.steps, "Steps to plan with --config")
      ->check(at_least_one())
      ->capture_default_str();
  cmd->add_option("--lengths", a.lengths,
                  "Lengths: .tsv with a gpt2_tokens column, one per line, or .idx");
  cmd->add_option("--trainers,-T", a.trainers, "Trainers");
  cmd->add_option("--trainers-per-node", a.trainers_per_node,
                  "Trainers (as --trainers counts them) a node, placed in blocks: rings inside a "
                  "node use the intra-node link (--nvlink, or plan.intra_bandwidth) and hdp keeps "
                  "rings inside nodes (default: --lengths takes 8 GPUs a node for links only, "
                  "--config no nodes)")
      ->check(at_least_one());
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
  cmd->add_option("--cp-algorithm", a.cp_algorithm,
                  "How split sequences run attention: ring, ulysses, hybrid or auto "
                  "(plan.cp_algorithm)")
      ->capture_default_str();
  cmd->add_option("--tp", a.tp, "Tensor-parallel GPUs per trainer")->capture_default_str();
  cmd->add_option("--pp", a.pp,
                  "Pipeline stages per trainer: plan the batch with PP-Balance and round-robin "
                  "(planning only; sequences must fit --capacity)")
      ->capture_default_str();
  cmd->add_option("--gpu-tflops", a.tflops, "Peak TFLOP/s per GPU")->capture_default_str();
  cmd->add_option("--mfu", a.mfu, "Share of the peak reached")->capture_default_str();
  cmd->add_option("--bandwidth", a.bandwidth, "GB/s per GPU across nodes")->capture_default_str();
  cmd->add_option("--nvlink", a.nvlink, "GB/s per GPU inside a node")->capture_default_str();
  cmd->add_option("--json", a.json, "Write the plan as readable JSON");
  cmd->add_option("--out", a.out, "Write the binary plan (plan/io/plan_io.hpp)");
  cmd->add_option("--png", a.png,
                  "Draw trainer x time of this plan and the other (hdp vs static) side by side");
  cmd->add_option("--calibrate", a.calibrate,
                  "Fit a, b, g of the cost model to a CSV 'tokens,sum_l2,seconds' of measured "
                  "micro-batches");
  cmd->callback([run] { *run = [] { return runtime::plan_command(a); }; });
}

}  // namespace meshloom::app
