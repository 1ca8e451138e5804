// `meshloom data`: the data path alone, on the real role layout
// (runtime/data_job.hpp), and the hidden `data-worker` command of the
// colocated baseline's worker processes (roles/data_worker.hpp).
#include "app/commands.hpp"
#include "parallel/world.hpp"
#include "roles/data_worker.hpp"
#include "runtime/data_job.hpp"
#include "sources/doc_source.hpp"

namespace meshloom::app {
namespace {

struct DataArgs {
  std::string file;
  std::vector<std::string> sets;
  runtime::DataRun run;
};

int data(const DataArgs& a, int* argc, char*** argv) {
  parallel::mpi_start(argc, argv);
  parallel::World w;
  if (!parallel::world_from_config(a.file, a.sets, &w)) return parallel::mpi_finish(kExitBadInput);
  if (!parallel::preflight_on_root(w, [&] { sources::check_sources(w.config); }))
    return parallel::mpi_finish(kExitBadInput);
  parallel::start_finished();
  return parallel::mpi_finish(runtime::run_data(w, a.run));
}

}  // namespace

void add_data(CLI::App& app, Runner* run, int* argc, char*** argv) {
  static DataArgs args;
  CLI::App* cmd = app.add_subcommand(
      "data", "Run the data path alone (loaders, constructors, trainers) and report on it");
  cmd->add_option("--config,-c", args.file, "Experiment YAML")->required();
  cmd->add_option("--set", args.sets, "Override a key (repeatable)");
  cmd->add_option("--steps", args.run.steps, "Steps to deliver")->check(at_least_one());
  cmd->add_option("--dump", args.run.dump, "Write the global batches to this HDF5 file");
  cmd->add_option("--report", args.run.report,
                  "Write the summary (tokens/s, memory per role) to this JSON file");
  cmd->callback([run, argc, argv] { *run = [argc, argv] { return data(args, argc, argv); }; });
  // Hidden: a colocated trainer's DataLoader-style worker process
  // (data.colocated_processes), started by the trainer with its socket as fd 3.
  static int worker_rank = 0, worker_index = 0;
  CLI::App* worker = app.add_subcommand("data-worker", "");
  worker->group("");
  worker->add_option("--rank", worker_rank)->required();
  worker->add_option("--index", worker_index)->required();
  worker->callback(
      [run] { *run = [] { return roles::run_data_worker(3, worker_rank, worker_index); }; });
}

}  // namespace meshloom::app
