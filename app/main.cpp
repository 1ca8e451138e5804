// meshloom: one SPMD executable; the subcommand says what this run does.
#include <chrono>
#include <cstdio>
#include <exception>
#include <thread>

#include "app/commands.hpp"
#include "base/check.hpp"
#include "parallel/world.hpp"

int main(int argc, char** argv) {
  using namespace meshloom;
  using namespace meshloom::app;
  CLI::App app{
      "meshloom: long-context training with Hybrid Data Parallelism on a dynamic mesh.\n"
      "Launch training under mpirun or srun; see README.md."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "meshloom 0.1.0");
  Runner run;
  add_train(app, &run, &argc, &argv);
  add_config(app, &run);
  add_tokenize(app, &run);
  add_prepare(app, &run);
  add_data(app, &run, &argc, &argv);
  add_simulate(app, &run);
  add_plan(app, &run);
  add_hf(app, &run);
  add_eval(app, &run, &argc, &argv);
  // Under a launcher every rank parses the same command line: rank 0 reports
  // what is wrong with it, the others only leave with the same code.
  const std::string rank = meshloom::parallel::launcher_rank();
  const bool reporter = rank == "0" || rank == "?";
  // mpirun ends the job at the first non-zero exit: the others leave a moment
  // after rank 0, so that its message is out first.
  auto leave_after_reporter = [&] {
    meshloom::parallel::record_exit(kExitBadInput);
    if (!reporter) std::this_thread::sleep_for(std::chrono::seconds(1));
    return kExitBadInput;
  };
  auto bad_input = [&](const std::string& message) {
    if (reporter) meshloom::print_error(message);
    return leave_after_reporter();
  };
  if (argc > 1 && argv[1][0] != '-') {  // CLI11 would say only "A subcommand is required"
    std::string names;
    bool known = false;
    for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
      names += (names.empty() ? "" : ", ") + sub->get_name();
      known = known || sub->check_name(argv[1]);
    }
    if (!known)
      return bad_input("unknown command '" + std::string(argv[1]) + "'; the commands are " + names);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    return bad_input(std::string(e.what()) + " (--help lists the options)");
  }
  try {
    return run ? run() : kExitFatal;
  } catch (...) {
    const Failure f = failure_of(std::current_exception());
    if (f.exit_code == kExitBadInput) return bad_input(f.message);
    meshloom::print_error(f.message, rank);
    meshloom::parallel::record_exit(f.exit_code);
    return f.exit_code;
  }
}
