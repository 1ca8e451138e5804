// `meshloom train`: the whole system under mpirun/srun. This file parses the
// command line; runtime/train_job.hpp runs the job.
#include <cstdlib>

#include "app/commands.hpp"
#include "base/strings.hpp"
#include "parallel/world.hpp"
#include "runtime/model_init.hpp"
#include "runtime/preflight.hpp"
#include "runtime/train_job.hpp"

namespace meshloom::app {
namespace {

struct TrainArgs {
  std::string file;
  std::vector<std::string> sets;
  bool dry_run = false;
  bool stop_at_given = false;
  std::vector<std::string> dump;  // --dump-step N FILE
  runtime::TrainRun run;
};

// The options' own checks, before MPI starts (errors are printed by rank 0).
void check_args(TrainArgs* a) {
  if (!a->dump.empty()) {
    char* end = nullptr;
    a->run.dump_step = std::strtoll(a->dump[0].c_str(), &end, 10);
    if (*end != '\0' || a->run.dump_step < 0)
      throw Error("--dump-step: '" + a->dump[0] + "' is not a step number");
    a->run.dump_file = a->dump[1];
  }
  if (a->stop_at_given && a->run.stop_at < 0)
    throw Error(strf("--stop-at %lld: give a step, 0 or more", (long long)a->run.stop_at));
}

int train(TrainArgs* a, int* argc, char*** argv) {
  check_args(a);
  parallel::mpi_start(argc, argv);
  parallel::World w;
  if (!parallel::world_from_config(a->file, a->sets, &w, runtime::load_run_config))
    return parallel::mpi_finish(kExitBadInput);
  if (!parallel::preflight_on_root(w, [&] { runtime::check_train_start(w, a->run); }))
    return parallel::mpi_finish(kExitBadInput);
  if (a->dry_run) return parallel::mpi_finish(runtime::print_dry_run(w));
  return parallel::mpi_finish(runtime::run_train(w, a->run));
}

}  // namespace

void add_train(CLI::App& app, Runner* run, int* argc, char*** argv) {
  static TrainArgs args;
  CLI::App* cmd = app.add_subcommand("train", "Train under mpirun/srun (one process per rank)");
  cmd->add_option("--config,-c", args.file, "Experiment YAML")->required();
  cmd->add_option("--set", args.sets, "Override a key: --set optim.lr=1e-3 (repeatable)");
  cmd->add_flag(
      "--dry-run", args.dry_run,
      "Check the config, the rank/role layout, the sources and the output folders; print the "
      "config and the layout, and exit");
  cmd->add_option("--resume", args.run.resume,
                  "Continue from a checkpoint: auto (the newest good one in the checkpoint "
                  "folder, or a fresh start) or a checkpoint file");
  cmd->add_flag("--overwrite", args.run.overwrite,
                "Start even where the checkpoint folder holds checkpoints this run would not "
                "continue from (another run's, or later steps than --resume's): move them aside "
                "into a replaced-<time> folder inside it");
  cmd->add_option("--stop-at", args.run.stop_at,
                  "Stop cleanly before this step (as a preempted job would); checkpoints and "
                  "the schedule still follow run.steps");
  cmd->add_option("--dump-step", args.dump,
                  "Write step N's batch, loss, parameters and gradients to HDF5 FILE")
      ->expected(2)
      ->type_name("N FILE");
  cmd->callback([cmd, run, argc, argv] {
    args.stop_at_given = cmd->count("--stop-at") > 0;
    *run = [argc, argv] { return train(&args, argc, argv); };
  });
}

}  // namespace meshloom::app
