// `meshloom tokenize`: the token ids of text or files, or (--bench) the encode
// throughput of one thread over files, for scripts/bench/bench_tokenizer.sh.
// No MPI: it runs anywhere.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "app/commands.hpp"
#include "base/check.hpp"
#include "base/strings.hpp"
#include "tokenizer/tokenizer.hpp"

namespace meshloom::app {
namespace {

struct TokenizeArgs {
  std::string spec = "gpt2";
  std::string text;
  std::vector<std::string> files;
  bool bench = false;
  bool special = false;
  bool templated = false;
  int reps = 1;
};

std::string read_whole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read " + path);
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

void print_ids(const std::vector<int32_t>& ids) {
  std::string line;
  line.reserve(ids.size() * 6);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) line.push_back(' ');
    line += std::to_string(ids[i]);
  }
  line.push_back('\n');
  std::fwrite(line.data(), 1, line.size(), stdout);
}

int run_tokenize(const TokenizeArgs& a) {
  const std::unique_ptr<tokenizer::Tokenizer> tok = tokenizer::make_tokenizer(a.spec);
  std::vector<std::string> specials;
  if (a.special && tok->eot_id() >= 0) specials.push_back("<|endoftext|>");
  auto encode = [&](const std::string& t) {
    if (a.templated) return tok->encode_templated(t);
    return a.special ? tok->encode_with_special(t, specials) : tok->encode(t);
  };
  if (!a.bench) {
    if (a.text.empty() && a.files.empty()) throw Error("tokenize: give --text or FILE...");
    if (!a.text.empty()) print_ids(encode(a.text));
    for (const std::string& f : a.files) print_ids(encode(read_whole(f)));
    return kExitOk;
  }
  if (a.files.empty() && a.text.empty()) throw Error("tokenize --bench: give FILE... or --text");
  // Files are read before timing; only encode() is measured, on this thread.
  std::vector<std::string> texts;
  if (!a.text.empty()) texts.push_back(a.text);
  for (const std::string& f : a.files) texts.push_back(read_whole(f));
  size_t bytes = 0;
  for (const std::string& t : texts) bytes += t.size();
  (void)encode(texts.front().substr(0, 10000));  // warm up, as the npm baseline does
  size_t tokens = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < a.reps; ++r)
    for (const std::string& t : texts) tokens += encode(t).size();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double total = static_cast<double>(bytes) * a.reps;
  std::printf("tokenizer=%s files=%zu bytes=%.0f tokens=%zu seconds=%.3f mb_per_s=%.2f threads=1\n",
              a.spec.c_str(), texts.size(), total, tokens, seconds, total / seconds / 1e6);
  return kExitOk;
}

}  // namespace

void add_tokenize(CLI::App& app, Runner* run) {
  static TokenizeArgs args;
  CLI::App* cmd = app.add_subcommand(
      "tokenize", "Print the token ids of text or files (one line each), or measure encode speed");
  cmd->add_option("--tokenizer,-t", args.spec,
                  "byte, gpt2, tiktoken:NAME|FILE (cl100k_base, o200k_base or a rank file) or "
                  "hf:FILE (a Hugging Face tokenizer.json)")
      ->capture_default_str();
  cmd->add_option("--text", args.text, "Text to tokenize");
  cmd->add_option("files", args.files, "Files to tokenize")->check(CLI::ExistingFile);
  cmd->add_flag("--bench", args.bench, "Print encode throughput (MB/s, one thread) instead of ids");
  cmd->add_option("--reps", args.reps, "With --bench: passes over the input")
      ->check(at_least_one());
  cmd->add_flag("--special", args.special, "Map the text <|endoftext|> to its id (default: text)");
  cmd->add_flag("--templated", args.templated,
                "Hugging Face's encode with special tokens: every special token's text is its id, "
                "and an hf: tokenizer's template adds its tokens (Llama 3.1: BOS)");
  cmd->callback([run] { *run = [] { return run_tokenize(args); }; });
}

}  // namespace meshloom::app
