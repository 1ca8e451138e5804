// `meshloom prepare`: text (folders, files, JSON Lines, tar archives) to a
// Megatron indexed dataset; `meshloom inspect`: check and summarize one.
// No MPI: both run on a login node. The pipeline lives in lib/data/prepare.hpp;
// this file is the command line, the progress line and the report.
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "app/commands.hpp"
#include "base/check.hpp"
#include "base/log.hpp"
#include "base/strings.hpp"
#include "data/indexed_dataset.hpp"
#include "data/prepare.hpp"
#include "tokenizer/tokenizer.hpp"

namespace meshloom::app {

namespace {

double mb(double bytes) { return bytes / 1e6; }

std::string with_commas(unsigned long long v) {
  std::string digits = std::to_string(v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

// The progress line: rewritten in place on a terminal, else a line now and then.
void print_progress(Progress* shown, const data::PrepareProgress& p) {
  const bool last = p.input_done >= p.input_total;
  if (!shown->due(p.seconds, last)) return;
  const double rate = p.seconds > 0 ? mb(static_cast<double>(p.input_done)) / p.seconds : 0;
  std::string eta = last ? "done" : "ETA ?";
  if (!last && rate > 0)
    eta = "ETA " + human_seconds(mb(static_cast<double>(p.input_total - p.input_done)) / rate);
  std::fprintf(stderr, "%s  %s docs, %.1f / %.1f MB, %.1f MB/s, %s tokens, %s%s", shown->begin(),
               with_commas(p.documents).c_str(), mb(static_cast<double>(p.input_done)),
               mb(static_cast<double>(p.input_total)), rate, with_commas(p.tokens).c_str(),
               eta.c_str(), shown->end());
  std::fflush(stderr);
}

void print_report(const data::PrepareReport& r, const std::string& prefix,
                  const Tokenizer& tokenizer) {
  const data::InputReport& in = r.input;
  std::printf("meshloom prepare: wrote %s (%s, %s) and %s\n", data::bin_path(prefix).c_str(),
              human_bytes(static_cast<double>(r.bin_bytes)).c_str(), data::dtype_name(r.dtype),
              data::idx_path(prefix).c_str());
  std::printf("  documents   %s\n", with_commas(in.documents).c_str());
  std::printf(
      "  tokens      %s (%s, %s)\n", with_commas(r.tokens).c_str(), tokenizer.name().c_str(),
      r.eot_appended ? strf("end-of-text %d after each document", tokenizer.eot_id()).c_str()
                     : "no end-of-text id");
  std::printf("  input       %.1f MB read, %.1f MB of text\n",
              mb(static_cast<double>(r.input_bytes)), mb(static_cast<double>(r.text_bytes)));
  const double secs = std::max(r.seconds, 1e-9);
  std::printf(
      "  time        %s, %.1f MB/s of text (%.1f MB/s of input), %.2f M tokens/s, "
      "%d thread%s\n",
      human_seconds(r.seconds).c_str(), mb(static_cast<double>(r.text_bytes)) / secs,
      mb(static_cast<double>(r.input_bytes)) / secs, static_cast<double>(r.tokens) / secs / 1e6,
      r.threads, r.threads == 1 ? "" : "s");
  std::printf("  skipped     %s empty, %s unreadable\n", with_commas(in.empty).c_str(),
              with_commas(in.unreadable).c_str());
  std::printf("  invalid     %s documents with invalid UTF-8 (%s sequences replaced by U+FFFD)\n",
              with_commas(in.invalid_utf8_documents).c_str(),
              with_commas(in.invalid_utf8_sequences).c_str());
  if (!in.problems.empty()) {
    std::printf("  problems (first %zu of %s):\n", in.problems.size(),
                with_commas(in.unreadable).c_str());
    for (const std::string& p : in.problems) std::printf("    %s\n", p.c_str());
  }
}

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
    print_progress(&progress, p);
  };
  std::unique_ptr<Tokenizer> tokenizer = make_tokenizer(a.tokenizer);
  data::PrepareReport report = data::prepare_dataset(options, *tokenizer);
  if (progress.redraw()) std::fputc('\n', stderr);
  print_report(report, a.out, *tokenizer);
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
    std::unique_ptr<Tokenizer> tokenizer = make_tokenizer(a.tokenizer);
    const std::vector<int32_t> ids = ds.tokens(static_cast<size_t>(a.show)).to_vector();
    const std::string text = tokenizer->decode(ids);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fputc('\n', stdout);
    return kExitOk;
  }
  std::vector<int64_t> lengths(ds.size());
  for (size_t i = 0; i < ds.size(); ++i) lengths[i] = ds.length(i);
  std::sort(lengths.begin(), lengths.end());
  auto pct = [&lengths](double q) {
    return lengths.empty()
               ? 0LL
               : static_cast<long long>(
                     lengths[static_cast<size_t>(q * static_cast<double>(lengths.size() - 1))]);
  };
  std::printf("%s: %s, %s sequences, %s documents, %s tokens\n", a.prefix.c_str(),
              data::dtype_name(ds.dtype()), with_commas(ds.size()).c_str(),
              with_commas(ds.num_documents()).c_str(), with_commas(ds.num_tokens()).c_str());
  std::printf(
      "  sequence length: min %lld, median %lld, p99 %lld, max %lld, mean %.1f\n", pct(0), pct(0.5),
      pct(0.99), pct(1.0),
      ds.size() ? static_cast<double>(ds.num_tokens()) / static_cast<double>(ds.size()) : 0.0);
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
                  "byte, gpt2, or tiktoken:NAME|FILE (cl100k_base, o200k_base or a rank file)")
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
