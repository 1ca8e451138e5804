// Each subcommand lives in its own file: it adds its options to the CLI and
// sets `run` to the function that does the work and returns the exit code.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <functional>
#include <string>

#include "base/check.hpp"

namespace meshloom::app {

using Runner = std::function<int()>;

// CLI11's PositiveNumber says "Value 0 not in range 0 to 1.8e308": this says
// what is wanted.
inline CLI::Validator at_least_one() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        const long long n = std::strtoll(text.c_str(), &end, 10);
        return end != text.c_str() && *end == '\0' && n >= 1
                   ? ""
                   : "'" + text + "' is not a whole number of 1 or more";
      },
      "N>=1");
}

void add_train(CLI::App& app, Runner* run, int* argc, char*** argv);
void add_config(CLI::App& app, Runner* run);
void add_tokenize(CLI::App& app, Runner* run);
void add_prepare(CLI::App& app, Runner* run);  // prepare and inspect
void add_data(CLI::App& app, Runner* run, int* argc, char*** argv);
void add_simulate(CLI::App& app, Runner* run);
void add_plan(CLI::App& app, Runner* run);
void add_hf(CLI::App& app, Runner* run);  // import-hf and export-hf
void add_eval(CLI::App& app, Runner* run, int* argc, char*** argv);

// `meshloom inspect CKPT.h5` (app/inspect_checkpoint.cpp).
int inspect_checkpoint(const std::string& path);

}  // namespace meshloom::app
