// `meshloom import-hf` and `meshloom export-hf`: the options; the work is
// runtime/hf_checkpoint.hpp.
#include <cstdio>

#include "app/commands.hpp"
#include "runtime/hf_checkpoint.hpp"

namespace meshloom::app {

namespace {

void print_transfer(const char* what, const runtime::HfTransfer& t, const std::string& to) {
  std::printf("%s: %lld tensors, %lld parameters, %.1f MB in %lld file(s) -> %s\n", what,
              (long long)t.tensors, (long long)t.parameters, double(t.bytes) / 1e6,
              (long long)t.files, to.c_str());
}

}  // namespace

void add_hf(CLI::App& app, Runner* run) {
  static std::string dir, out;
  CLI::App* in = app.add_subcommand(
      "import-hf",
      "Convert a Hugging Face Llama checkpoint (config.json + safetensors) into a weights file "
      "that model.init takes");
  in->add_option("dir", dir, "Folder with config.json and model.safetensors (or its index)")
      ->required();
  in->add_option("--out,-o", out, "The weights file to write (.h5)")->required();
  in->callback([run] {
    *run = [] {
      print_transfer("import-hf", runtime::import_hf(dir, out), out);
      return kExitOk;
    };
  });

  static std::string weights, to;
  static runtime::ExportOptions options;
  CLI::App* ex = app.add_subcommand(
      "export-hf",
      "Write a weights file's or checkpoint's model as a Hugging Face Llama checkpoint "
      "(config.json, generation_config.json, safetensors, tokenizer.json)");
  ex->add_option("file", weights, "A weights file (import-hf) or a checkpoint (step_N.h5)")
      ->required();
  ex->add_option("--out,-o", to, "The folder to write")->required();
  ex->add_option("--dtype", options.dtype, "bf16 or f32")->capture_default_str();
  ex->add_option("--shard-size", options.shard_bytes,
                 "Bytes a safetensors file holds at most before the next begins")
      ->capture_default_str();
  ex->add_option("--tokenizer", options.tokenizer,
                 "tokenizer.json to copy (default: the config's first hf: tokenizer)");
  ex->add_option("--max-positions", options.max_positions,
                 "config.json's max_position_embeddings (default: data.seq_len)");
  ex->callback([run] {
    *run = [] {
      print_transfer("export-hf", runtime::export_hf(weights, to, options), to);
      return kExitOk;
    };
  });
}

}  // namespace meshloom::app
