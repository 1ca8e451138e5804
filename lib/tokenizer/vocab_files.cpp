// Vocabulary lookup and parsing (see vocab_files.hpp). Every error names the
// file, so a missing or truncated download is obvious.
#include "tokenizer/vocab_files.hpp"

#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/check.hpp"
#include "base/strings.hpp"

namespace meshloom::tokenizer {
namespace fs = std::filesystem;
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open vocabulary file " + path);
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

void add_upward(const fs::path& start, std::vector<std::string>* dirs) {
  if (start.empty()) return;
  for (fs::path p = start;; p = p.parent_path()) {
    std::error_code ec;
    const fs::path candidate = p / "third_party" / "npm" / "node_modules";
    if (fs::is_directory(candidate, ec)) {
      const std::string s = candidate.string();
      bool seen = false;
      for (const std::string& d : *dirs) seen |= d == s;
      if (!seen) dirs->push_back(s);
    }
    if (p == p.parent_path()) break;
  }
}

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+' || c == '-') return 62;
  if (c == '/' || c == '_') return 63;
  return -1;
}

bool base64_decode(std::string_view in, std::string* out) {
  out->clear();
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    if (c == '=') break;
    const int v = base64_value(c);
    if (v < 0) return false;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return true;
}

SplitPattern pattern_of(std::string_view pat, const std::string& path) {
  SplitPattern p;
  if (split_pattern_of_regex(pat, &p)) return p;
  throw Error("tokenizer rank file " + path +
              ": unsupported split pattern (pat_str); known: gpt2/r50k/p50k, cl100k, o200k");
}

// Ranks (ids) are below 2^24, as model.vocab_size and GPT-2's encoder.json
// ids are: a rank file is dense, so a larger rank is corrupt, and would
// allocate ids up to it.
constexpr int64_t kMaxRank = int64_t(1) << 24;

std::string stem_of(const std::string& path) { return fs::path(path).stem().string(); }

// npm tiktoken's NAME.json.
BpeVocab read_tiktoken_json(const std::string& path) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::exception& e) {
    throw Error("tokenizer rank file " + path + ": invalid JSON: " + e.what());
  }
  if (!j.is_object() || !j.contains("bpe_ranks") || !j["bpe_ranks"].is_string() ||
      !j.contains("pat_str") || !j["pat_str"].is_string())
    throw Error("tokenizer rank file " + path +
                ": expected an object with string fields bpe_ranks and pat_str");
  BpeVocab v;
  v.name = stem_of(path);
  v.source = path;
  v.pattern = pattern_of(j["pat_str"].get<std::string>(), path);
  const std::string& ranks = j["bpe_ranks"].get_ref<const std::string&>();
  std::string bytes;
  size_t line_no = 0;
  for (size_t pos = 0; pos < ranks.size();) {
    size_t eol = ranks.find('\n', pos);
    if (eol == std::string::npos) eol = ranks.size();
    const std::string_view line(ranks.data() + pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    if (line.empty()) continue;
    // "MARK FIRST_RANK b64 b64 ...": consecutive ranks from FIRST_RANK.
    const size_t s1 = line.find(' ');
    const size_t s2 = s1 == std::string_view::npos ? s1 : line.find(' ', s1 + 1);
    int64_t rank = -1;
    if (s2 != std::string_view::npos) {
      const std::string first(line.substr(s1 + 1, s2 - s1 - 1));
      char* end = nullptr;
      rank = std::strtoll(first.c_str(), &end, 10);
      if (first.empty() || *end) rank = -1;
    }
    if (rank < 0)
      throw Error(
          strf("tokenizer rank file %s: bpe_ranks line %zu does not start with "
               "\"MARK FIRST_RANK\"",
               path.c_str(), line_no));
    if (rank >= kMaxRank)
      throw Error(strf("tokenizer rank file %s: bpe_ranks line %zu: rank %lld is not below 2^24",
                       path.c_str(), line_no, static_cast<long long>(rank)));
    for (size_t k = s2 + 1; k < line.size();) {
      size_t e = line.find(' ', k);
      if (e == std::string_view::npos) e = line.size();
      if (!base64_decode(line.substr(k, e - k), &bytes) || bytes.empty())
        throw Error(strf("tokenizer rank file %s: bad base64 token for rank %lld", path.c_str(),
                         static_cast<long long>(rank)));
      if (rank >= kMaxRank)
        throw Error(strf("tokenizer rank file %s: bpe_ranks line %zu: rank %lld is not below 2^24",
                         path.c_str(), line_no, static_cast<long long>(rank)));
      if (static_cast<size_t>(rank) >= v.tokens.size()) v.tokens.resize(rank + 1);
      v.tokens[rank++] = bytes;
      k = e + 1;
    }
  }
  if (j.contains("special_tokens") && j["special_tokens"].is_object())
    for (const auto& [text, id] : j["special_tokens"].items()) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= kMaxRank)
        throw Error("tokenizer rank file " + path + ": special token " + text +
                    " has no id in [0, 2^24)");
      v.specials.emplace_back(text, id.get<int32_t>());
    }
  if (j.contains("explicit_n_vocab") && j["explicit_n_vocab"].is_number_integer()) {
    const int64_t n = j["explicit_n_vocab"].get<int64_t>();
    if (n < 1 || n > kMaxRank)
      throw Error(strf("tokenizer rank file %s: explicit_n_vocab %lld is not in [1, 2^24]",
                       path.c_str(), static_cast<long long>(n)));
    v.vocab_size = static_cast<int32_t>(n);
  }
  return v;
}

// tiktoken's own NAME.tiktoken ("b64 RANK" lines); pattern and specials by NAME.
BpeVocab read_tiktoken_plain(const std::string& path) {
  const std::string text = read_file(path);
  BpeVocab v;
  v.name = stem_of(path);
  v.source = path;
  if (v.name.find("cl100k") != std::string::npos) {
    v.pattern = SplitPattern::kCl100k;
    v.specials = {{"<|endoftext|>", 100257},
                  {"<|fim_prefix|>", 100258},
                  {"<|fim_middle|>", 100259},
                  {"<|fim_suffix|>", 100260},
                  {"<|endofprompt|>", 100276}};
  } else if (v.name.find("o200k") != std::string::npos) {
    v.pattern = SplitPattern::kO200k;
    v.specials = {{"<|endoftext|>", 199999}, {"<|endofprompt|>", 200018}};
  } else if (v.name.find("r50k") != std::string::npos || v.name.find("p50k") != std::string::npos ||
             v.name.find("gpt2") != std::string::npos) {
    v.pattern = SplitPattern::kGpt2;
    v.specials = {{"<|endoftext|>", 50256}};
  } else {
    throw Error("tokenizer rank file " + path +
                ": cannot tell its split pattern from the name (expected cl100k, o200k, r50k, "
                "p50k or gpt2 in it), use the npm .json form");
  }
  std::istringstream in(text);
  std::string line, bytes;
  size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    const size_t sp = line.find(' ');
    char* end = nullptr;
    const long long rank =
        sp == std::string::npos ? -1 : std::strtoll(line.c_str() + sp + 1, &end, 10);
    if (rank < 0 || (end && *end) || !base64_decode(std::string_view(line).substr(0, sp), &bytes) ||
        bytes.empty())
      throw Error(
          strf("tokenizer rank file %s: line %zu is not \"BASE64 RANK\"", path.c_str(), line_no));
    if (rank >= kMaxRank)
      throw Error(strf("tokenizer rank file %s: line %zu: rank %lld is not below 2^24",
                       path.c_str(), line_no, rank));
    if (static_cast<size_t>(rank) >= v.tokens.size()) v.tokens.resize(rank + 1);
    v.tokens[rank] = bytes;
  }
  if (v.tokens.empty()) throw Error("tokenizer rank file " + path + " is empty");
  return v;
}

}  // namespace

std::vector<std::string> vocab_search_dirs() {
  if (const char* env = std::getenv("MESHLOOM_VOCAB_DIR"); env && *env) return {env};
  std::vector<std::string> dirs;
  std::error_code ec;
  add_upward(fs::current_path(ec), &dirs);
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) add_upward(exe.parent_path(), &dirs);
  // A build folder outside the checkout has no third_party above it; the
  // tree it was built from still has (scripts/setup.sh installs there).
  add_upward(fs::path(MESHLOOM_SOURCE_DIR), &dirs);
  return dirs;
}

std::string find_vocab_file(const std::string& spec, const std::vector<std::string>& names) {
  const std::vector<std::string> dirs = vocab_search_dirs();
  std::vector<std::string> tried;
  for (const std::string& dir : dirs) {
    for (const std::string& name : names) {
      const std::string path = (fs::path(dir) / name).string();
      std::error_code ec;
      if (fs::is_regular_file(path, ec)) return path;
      tried.push_back(path);
    }
  }
  const std::string file = fs::path(names.front()).filename().string();
  std::string msg = "tokenizer '" + spec + "': vocabulary file " + file + " not found";
  if (dirs.empty()) {
    std::error_code ec;
    msg += "; MESHLOOM_VOCAB_DIR is not set and no third_party/npm/node_modules lies above " +
           fs::current_path(ec).string() + " or the executable";
  } else {
    msg += " (tried " + join(tried, ", ") + ")";
  }
  msg += "; run scripts/setup.sh or set MESHLOOM_VOCAB_DIR";
  throw Error(msg);
}

uint32_t gpt2_byte_to_code_point(uint8_t byte) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool prints = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      t[b] = prints ? static_cast<uint32_t>(b) : next++;
    }
    return t;
  }();
  return table[byte];
}

bool gpt2_text_to_bytes(std::string_view text, std::string* out) {
  static const std::array<int16_t, 512> inverse = [] {
    std::array<int16_t, 512> t;
    t.fill(-1);
    for (int b = 0; b < 256; ++b)
      t[gpt2_byte_to_code_point(static_cast<uint8_t>(b))] = static_cast<int16_t>(b);
    return t;
  }();
  out->clear();
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<uint8_t>(text[i]);
    uint32_t cp;
    if (c < 0x80) {
      cp = c, i += 1;
    } else if ((c & 0xE0) == 0xC0 && i + 1 < text.size()) {
      cp = ((c & 0x1Fu) << 6) | (static_cast<uint8_t>(text[i + 1]) & 0x3Fu), i += 2;
    } else {
      return false;  // every mapped code point is below U+0800
    }
    if (cp >= inverse.size() || inverse[cp] < 0) return false;
    out->push_back(static_cast<char>(inverse[cp]));
  }
  return true;
}

BpeVocab read_gpt2_vocab(const std::string& encoder_json, const std::string& vocab_bpe) {
  BpeVocab v;
  v.name = "gpt2";
  v.source = encoder_json + " + " + vocab_bpe;
  v.pattern = SplitPattern::kGpt2;
  nlohmann::json enc;
  try {
    enc = nlohmann::json::parse(read_file(encoder_json));
  } catch (const nlohmann::json::exception& e) {
    throw Error("GPT-2 vocabulary file " + encoder_json + ": invalid JSON: " + e.what());
  }
  if (!enc.is_object() || enc.empty())
    throw Error("GPT-2 vocabulary file " + encoder_json + ": expected an object {token: id}");
  std::string bytes;
  for (const auto& [text, id_json] : enc.items()) {
    if (!id_json.is_number_integer() || id_json.get<int64_t>() < 0 ||
        id_json.get<int64_t>() > (1 << 24))
      throw Error("GPT-2 vocabulary file " + encoder_json + ": bad id for token " + text);
    const auto id = id_json.get<int32_t>();
    if (text == "<|endoftext|>") {
      v.specials.emplace_back(text, id);
      continue;
    }
    if (!gpt2_text_to_bytes(text, &bytes))
      throw Error("GPT-2 vocabulary file " + encoder_json + ": token " + text +
                  " is not in GPT-2's byte-to-unicode alphabet");
    if (static_cast<size_t>(id) >= v.tokens.size()) v.tokens.resize(id + 1);
    v.tokens[id] = bytes;
  }

  const std::string text = read_file(vocab_bpe);
  std::string left, right;
  size_t line_no = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    std::string_view line(text.data() + pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || line.starts_with("#version")) continue;
    const size_t sp = line.find(' ');
    if (sp == std::string_view::npos || sp == 0 || sp + 1 == line.size() ||
        line.find(' ', sp + 1) != std::string_view::npos ||
        !gpt2_text_to_bytes(line.substr(0, sp), &left) ||
        !gpt2_text_to_bytes(line.substr(sp + 1), &right))
      throw Error(
          strf("GPT-2 merges file %s: line %zu is not \"LEFT RIGHT\"", vocab_bpe.c_str(), line_no));
    v.merges.emplace_back(left, right);
  }
  if (v.merges.empty()) throw Error("GPT-2 merges file " + vocab_bpe + " has no merges");
  return v;
}

BpeVocab read_tiktoken_vocab(const std::string& path) {
  if (path.ends_with(".json")) return read_tiktoken_json(path);
  return read_tiktoken_plain(path);
}

}  // namespace meshloom::tokenizer
