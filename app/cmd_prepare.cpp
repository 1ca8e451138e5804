// `meshloom prepare`: text (folders, files, JSON Lines, tar archives) to a
// Megatron indexed dataset; `meshloom inspect`: check and summarize one.
// No MPI: both run on a login node. The pipeline lives in lib/data/prepare.hpp;
// this file is the command line, the progress line and the report.
#include <unistd.h>

#include <cstdio>

#include "app/commands.hpp"
#include "base/check.hpp"
#include "base/log.hpp"
#include "base/strings.hpp"
#include "data/indexed_dataset.hpp"
#include "data/prepare.hpp"
#include "data/report.hpp"
#include "tokenizer/tokenizer.hpp"

namespace meshloom::app {

namespace {

struct PrepareArgs {
  std::vector<std::string> inputs;
  std::string format = "text";
  std::string tokenizer;
  std::string out;
  std::string glob;
  std::string json_key = "text";
  int threads = 0;
};

int run_prepare(const PrepareArgs& a) {
  data::PrepareOptions options;
  options.inputs = a.inputs;
  options.reader.format = data::parse_input_format(a.format);
  options.reader.glob = a.glob;
  options.reader.json_key = a.json_key;
  options.out_prefix = a.out;
  options.threads = a.threads;
  Progress progress(STDERR_FILENO);
  options.on_progress = [&progress](const data::PrepareProgress& p) {
    if (!progress.due(p.seconds, p.input_done >= p.input_total)) return;
    std::fprintf(stderr, "%s%s%s", progress.begin(), data::prepare_progress_line(p).c_str(),
                 progress.end());
    std::fflush(stderr);
  };
  std::unique_ptr<tokenizer::Tokenizer> tokenizer = tokenizer::make_tokenizer(a.tokenizer);
  data::PrepareReport report = data::prepare_dataset(options, *tokenizer);
  if (progress.redraw()) std::fputc('\n', stderr);
  std::fputs(data::prepare_report(report, a.out, tokenizer->name(), tokenizer->eot_id()).c_str(),
             stdout);
  return kExitOk;
}

struct InspectArgs {
  std::string prefix;
  std::string tokenizer = "byte";
  long long show = -1;
  bool dump = false;
};

int run_inspect(const InspectArgs& a) {
  if (a.prefix.size() > 3 && a.prefix.substr(a.prefix.size() - 3) == ".h5")
    return inspect_checkpoint(a.prefix);
  data::IndexedDataset ds(a.prefix);  // validates; throws naming the file
  if (a.dump) {
    std::string line;
    for (size_t i = 0; i < ds.size(); ++i) {
      const data::TokenView v = ds.tokens(i);
      line.clear();
      for (size_t k = 0; k < v.size; ++k) {
        if (k > 0) line.push_back(' ');
        line += std::to_string(v[k]);
      }
      line.push_back('\n');
      std::fputs(line.c_str(), stdout);
    }
    return kExitOk;
  }
  if (a.show >= 0) {
    if (static_cast<size_t>(a.show) >= ds.size())
      throw meshloom::Error(strf("%s: sequence %lld out of range (%zu sequences)", a.prefix.c_str(),
                                 a.show, ds.size()));
    std::unique_ptr<tokenizer::Tokenizer> tokenizer = tokenizer::make_tokenizer(a.tokenizer);
    const std::vector<int32_t> ids = ds.tokens(static_cast<size_t>(a.show)).to_vector();
    const std::string text = tokenizer->decode(ids);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fputc('\n', stdout);
    return kExitOk;
  }
  std::fputs(data::dataset_summary(ds, a.prefix).c_str(), stdout);
  return kExitOk;
}

}  // namespace

void add_prepare(CLI::App& app, Runner* run) {
  static PrepareArgs prep;
  CLI::App* cmd =
      app.add_subcommand("prepare",
                         "Tokenize text (folders, files, JSON Lines, tar archives) into a Megatron "
                         "indexed dataset PREFIX.bin + PREFIX.idx");
  cmd->add_option("--input,-i", prep.inputs,
                  "Input files or folders (folders are read recursively)")
      ->required()
      ->expected(1, -1);
  cmd->add_option("--format", prep.format,
                  "text: one document per file; jsonl: one per line's "
                  "text field; tar: one per archive member (.gz, .xz ok)")
      ->check(CLI::IsMember({"text", "jsonl", "tar"}))
      ->capture_default_str();
  cmd->add_option("--tokenizer", prep.tokenizer,
                  "byte, gpt2, tiktoken:NAME|FILE (cl100k_base, o200k_base or a rank file) or "
                  "hf:FILE (a Hugging Face tokenizer.json)")
      ->required();
  cmd->add_option("--out,-o", prep.out, "Output prefix: writes PREFIX.bin and PREFIX.idx")
      ->required();
  cmd->add_option("--threads", prep.threads, "Tokenizing threads (0: one per core)")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  cmd->add_option("--glob", prep.glob,
                  "Only files (in folders) or members (in archives) whose name matches, "
                  "e.g. '*.rst.txt'");
  cmd->add_option("--json-key", prep.json_key, "The JSON Lines field holding the text")
      ->capture_default_str();
  cmd->callback([run] { *run = [] { return run_prepare(prep); }; });

  static InspectArgs insp;
  CLI::App* icmd = app.add_subcommand(
      "inspect",
      "Verify and summarize a checkpoint (FILE.h5) or a Megatron indexed dataset (PREFIX.bin + "
      "PREFIX.idx)");
  icmd->add_option("path", insp.prefix,
                   "Checkpoint file (.h5), or dataset prefix (without .bin/.idx)")
      ->required();
  icmd->add_option("--show", insp.show, "Print sequence N decoded with --tokenizer");
  icmd->add_option("--tokenizer", insp.tokenizer, "Tokenizer for --show")->capture_default_str();
  icmd->add_flag("--dump", insp.dump, "Print every sequence's token ids, one line each");
  icmd->callback([run] { *run = [] { return run_inspect(insp); }; });
}

}  // namespace meshloom::app
