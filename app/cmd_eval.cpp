// `meshloom eval`: a checkpoint or a Hugging Face model on the config's
// held-out split, under mpirun/srun. This file parses the command line;
// runtime/eval_job.hpp runs the job.
#include "app/commands.hpp"
#include "parallel/world.hpp"
#include "runtime/eval_job.hpp"
#include "runtime/model_init.hpp"

namespace meshloom::app {
namespace {

struct EvalArgs {
  std::string file, checkpoint, hf, out, passkey;
  std::vector<std::string> sets;
  int64_t seq_len = 0, tokens = 0;
  runtime::EvalRun run;
};

// The options as config overrides: the weights are model.init, the rest
// data.seq_len and eval.tokens, so that every check of a run applies.
std::vector<std::string> overrides(const EvalArgs& a) {
  std::vector<std::string> sets = a.sets;
  if (!a.checkpoint.empty()) sets.push_back("model.init=" + a.checkpoint);
  if (!a.hf.empty()) sets.push_back("model.init=hf:" + a.hf);
  if (a.seq_len > 0) sets.push_back("data.seq_len=" + std::to_string(a.seq_len));
  if (a.tokens > 0) sets.push_back("eval.tokens=" + std::to_string(a.tokens));
  if (!a.passkey.empty()) sets.push_back("eval.passkey.lengths=[" + a.passkey + "]");
  sets.push_back("eval.every=0");  // no training steps to follow
  return sets;
}

int evaluate(EvalArgs* a, int* argc, char*** argv) {
  parallel::mpi_start(argc, argv);
  parallel::World w;
  if (!parallel::world_from_config(a->file, overrides(*a), &w, runtime::load_run_config))
    return parallel::mpi_finish(kExitBadInput);
  a->run.out_dir = a->out.empty() ? w.config.run.dir + "/eval" : a->out;
  if (!parallel::preflight_on_root(w, [&] { runtime::check_eval_start(w, a->run); }))
    return parallel::mpi_finish(kExitBadInput);
  return parallel::mpi_finish(runtime::run_eval(w, a->run));
}

}  // namespace

void add_eval(CLI::App& app, Runner* run, int* argc, char*** argv) {
  static EvalArgs args;
  CLI::App* cmd = app.add_subcommand(
      "eval", "Evaluate a checkpoint or a Hugging Face model on the held-out split (mpirun/srun)");
  cmd->add_option("--config,-c", args.file, "Experiment YAML (sources, eval.holdout, layout)")
      ->required();
  auto* ckpt = cmd->add_option("--checkpoint", args.checkpoint,
                               "A meshloom checkpoint (format 2) or weights file (import-hf)");
  auto* hf =
      cmd->add_option("--hf", args.hf, "A Hugging Face Llama folder (config.json, safetensors)");
  ckpt->excludes(hf);
  cmd->add_option("--seq-len", args.seq_len,
                  "Evaluate pieces of up to N tokens (data.seq_len), longer than trained at if "
                  "wanted (RoPE as the config says)")
      ->check(at_least_one());
  cmd->add_option("--tokens", args.tokens, "Held-out tokens to evaluate (eval.tokens)")
      ->check(at_least_one());
  cmd->add_option("--passkey", args.passkey,
                  "Passkey retrieval at these prompt lengths, e.g. 256,512,1024 "
                  "(eval.passkey.lengths; depths, trials and decoys: eval.passkey)");
  cmd->add_option("--out", args.out, "Output folder (default: run.dir/eval)");
  cmd->add_option("--report", args.run.report, "Write the summary as JSON to FILE");
  cmd->add_option("--set", args.sets, "Override a key: --set eval.holdout=0.01 (repeatable)");
  cmd->callback([run, argc, argv] { *run = [argc, argv] { return evaluate(&args, argc, argv); }; });
}

}  // namespace meshloom::app
