// `meshloom simulate`: the options; the command is runtime/simulate_command.hpp.
#include "app/commands.hpp"
#include "base/strings.hpp"
#include "plan/model_shape.hpp"
#include "runtime/simulate_command.hpp"

namespace meshloom::app {

void add_simulate(CLI::App& app, Runner* run) {
  static runtime::SimulateRequest a;
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
  cmd->add_option("--checkpoint-fs", a.checkpoint_fs,
                  "GB/s the file system takes from all writers: instead of planning, what a "
                  "checkpoint of --model on --gpus (--tp, --pp) costs, gathered on trainer 0 "
                  "against written by every trainer");
  cmd->add_option("--checkpoint-writer", a.checkpoint_writer,
                  "GB/s one process writes (--checkpoint-fs)")
      ->capture_default_str();
  cmd->callback([run] { *run = [] { return runtime::simulate_command(a); }; });
}

}  // namespace meshloom::app
