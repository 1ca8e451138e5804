// meshloom: one SPMD executable; the subcommand says what this run does.
#include <cstdio>

#include "app/commands.hpp"
#include "base/check.hpp"

int main(int argc, char** argv) {
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
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? kExitOk : kExitBadInput;
  }
  try {
    return run ? run() : kExitFatal;
  } catch (const meshloom::Error& e) {
    std::fprintf(stderr, "meshloom: error: %s\n", e.what());
    return kExitBadInput;
  }
}
