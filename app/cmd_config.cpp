// `meshloom config show|reference`: the effective config, or every key.
// No MPI: these run on a login node.
#include <cstdio>

#include "app/commands.hpp"
#include "config/config.hpp"
#include "runtime/model_init.hpp"

namespace meshloom::app {

void add_config(CLI::App& app, Runner* run) {
  CLI::App* cmd = app.add_subcommand("config", "Show the effective config, or the key reference");
  cmd->require_subcommand(1);

  struct ShowArgs {
    std::string file;
    std::vector<std::string> sets;
  };
  static ShowArgs show;
  CLI::App* show_cmd =
      cmd->add_subcommand("show", "Check a config and print it with every default filled in");
  show_cmd->add_option("--config,-c", show.file, "Experiment YAML")->required();
  show_cmd->add_option("--set", show.sets, "Override a key: --set data.seq_len=8192 (repeatable)");
  show_cmd->callback([run] {
    *run = [] {
      config::Config c = runtime::load_run_config(show.file, show.sets);
      std::fputs(config::to_yaml(c).c_str(), stdout);
      return kExitOk;
    };
  });

  CLI::App* ref_cmd = cmd->add_subcommand(
      "reference", "Print every config key with its type, default and meaning (markdown)");
  ref_cmd->callback([run] {
    *run = [] {
      std::fputs(config::reference_markdown().c_str(), stdout);
      return kExitOk;
    };
  });
}

}  // namespace meshloom::app
