// read_hf_tokenizer_json (see hf_tokenizer.hpp): tokenizer.json to HfConfig.
// Every refusal names the file and the JSON pointer of the offending value.
#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/check.hpp"
#include "base/strings.hpp"
#include "tokenizer/hf_tokenizer.hpp"
#include "tokenizer/vocab_files.hpp"

namespace meshloom::tokenizer {
namespace {

using nlohmann::json;

// Ids stay below 2^24, as for the other vocabularies (vocab_files.cpp).
constexpr int64_t kMaxId = int64_t(1) << 24;

// A key as a JSON pointer token (RFC 6901: "~" is "~0", "/" is "~1").
std::string pointer_token(const std::string& key) {
  std::string t;
  for (const char c : key) {
    if (c == '~')
      t += "~0";
    else if (c == '/')
      t += "~1";
    else
      t += c;
  }
  return t;
}

// A value of the file, with its JSON pointer for error messages.
struct Node {
  const std::string& file;
  const json& j;
  std::string ptr;

  Node at(const std::string& key) const {
    static const json kNull;
    const json* v = j.is_object() && j.contains(key) ? &j[key] : &kNull;
    return Node{file, *v, ptr + "/" + pointer_token(key)};
  }
  Node at(size_t i) const { return Node{file, j.at(i), ptr + "/" + std::to_string(i)}; }

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(file + ": " + (ptr.empty() ? "/" : ptr) + " " + what);
  }
  std::string shown() const {
    std::string s = j.dump();
    if (s.size() > 80) s = s.substr(0, 77) + "...";
    return s;
  }
  [[noreturn]] void unsupported(const std::string& known = "") const {
    fail(shown() + " is not supported" + (known.empty() ? "" : " (supported: " + known + ")"));
  }
  std::string str() const {
    if (!j.is_string()) fail("must be a string, not " + shown());
    return j.get<std::string>();
  }
  bool flag(bool missing) const {
    if (j.is_null()) return missing;
    if (!j.is_boolean()) fail("must be true or false, not " + shown());
    return j.get<bool>();
  }
  int32_t id() const {
    if (!j.is_number_integer() || j.get<int64_t>() < 0 || j.get<int64_t>() >= kMaxId)
      fail(strf("must be an id in [0, %lld), not ", static_cast<long long>(kMaxId)) + shown());
    return j.get<int32_t>();
  }
  // Requires `key` to be absent, null or equal to `ok` (or to "" for strings).
  void expect(const std::string& key, const json& ok) const {
    const Node v = at(key);
    if (v.j.is_null() || v.j == ok || (ok.is_null() && v.j == "")) return;
    v.unsupported(ok.is_null() ? "null" : ok.dump());
  }
};

std::string bytes_of(const Node& n, const std::string& text) {
  std::string bytes;
  if (!gpt2_text_to_bytes(text, &bytes))
    n.fail("\"" + text + "\" is not in the byte-level alphabet (a ByteLevel BPE is required)");
  return bytes;
}

void read_model(const Node& model, HfConfig* c) {
  const Node type = model.at("type");
  if (!type.j.is_null() && type.str() != "BPE") type.unsupported("BPE");
  for (const char* key : {"dropout", "continuing_subword_prefix", "end_of_word_suffix"})
    model.expect(key, nullptr);
  model.expect("byte_fallback", false);
  c->vocab.whole_tokens = model.at("ignore_merges").flag(false);

  const Node vocab = model.at("vocab");
  if (!vocab.j.is_object() || vocab.j.empty()) vocab.fail("must be an object {token: id}");
  for (const auto& [text, id_json] : vocab.j.items()) {
    const Node entry{vocab.file, id_json, vocab.ptr + "/" + pointer_token(text)};
    const int32_t id = entry.id();
    if (static_cast<size_t>(id) >= c->vocab.tokens.size()) c->vocab.tokens.resize(id + 1);
    c->vocab.tokens[id] = bytes_of(entry, text);
  }

  const Node merges = model.at("merges");
  if (!merges.j.is_array() || merges.j.empty()) merges.fail("must be a non-empty array");
  c->vocab.merges.reserve(merges.j.size());
  for (size_t i = 0; i < merges.j.size(); ++i) {
    const Node m = merges.at(i);
    std::string left, right;
    if (m.j.is_string()) {  // "a b"
      const std::string& s = m.j.get_ref<const std::string&>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || sp == 0 || sp + 1 == s.size() ||
          s.find(' ', sp + 1) != std::string::npos)
        m.fail("must be \"LEFT RIGHT\", not " + m.shown());
      left = s.substr(0, sp), right = s.substr(sp + 1);
    } else if (m.j.is_array() && m.j.size() == 2) {  // ["a", "b"]
      left = m.at(size_t{0}).str(), right = m.at(size_t{1}).str();
    } else {
      m.fail("must be \"LEFT RIGHT\" or [LEFT, RIGHT], not " + m.shown());
    }
    c->vocab.merges.emplace_back(bytes_of(m, left), bytes_of(m, right));
  }
}

void read_normalizer(const Node& n, HfConfig* c) {
  if (n.j.is_null()) return;
  const Node type = n.at("type");
  if (type.str() != "NFC") type.unsupported("null, NFC");
  c->nfc = true;
}

// ByteLevel as a pre-tokenizer: the bytes-to-alphabet map, never a prefix space.
void check_byte_level(const Node& n, bool use_regex) {
  n.expect("add_prefix_space", false);
  if (n.at("use_regex").flag(true) != use_regex)
    n.at("use_regex").unsupported(json(use_regex).dump());
}

void read_pre_tokenizer(const Node& n, HfConfig* c) {
  const std::string kKnown = "Sequence[Split, ByteLevel], ByteLevel";
  if (n.j.is_null()) n.unsupported(kKnown);
  const Node type = n.at("type");
  if (type.str() == "ByteLevel") {
    check_byte_level(n, true);
    c->vocab.pattern = SplitPattern::kGpt2;
    return;
  }
  if (type.str() != "Sequence") type.unsupported(kKnown);
  const Node seq = n.at("pretokenizers");
  if (!seq.j.is_array() || seq.j.size() != 2) seq.fail("must be [Split, ByteLevel]");
  const Node split = seq.at(size_t{0}), byte_level = seq.at(size_t{1});
  if (split.at("type").str() != "Split") split.at("type").unsupported("Split");
  if (byte_level.at("type").str() != "ByteLevel") byte_level.at("type").unsupported("ByteLevel");
  check_byte_level(byte_level, false);
  if (split.at("behavior").str() != "Isolated") split.at("behavior").unsupported("Isolated");
  split.expect("invert", false);
  const Node regex = split.at("pattern").at("Regex");
  if (regex.j.is_null()) split.at("pattern").unsupported("{\"Regex\": ...}");
  if (!split_pattern_of_regex(regex.str(), &c->vocab.pattern))
    regex.fail("is not a supported split regex (GPT-2, cl100k/Llama 3, Qwen2/Qwen3, o200k): " +
               regex.shown());
}

// The "single" template: ids of the special tokens before and after "A".
void read_template(const Node& n, HfConfig* c) {
  const Node single = n.at("single"), specials = n.at("special_tokens");
  if (!single.j.is_array()) single.fail("must be an array");
  bool seen_a = false;
  for (size_t i = 0; i < single.j.size(); ++i) {
    const Node item = single.at(i);
    if (item.j.contains("Sequence")) {
      const Node id = item.at("Sequence").at("id");
      if (id.str() != "A" || seen_a) id.unsupported("one \"A\"");
      seen_a = true;
      continue;
    }
    const Node name = item.at("SpecialToken").at("id");
    if (name.j.is_null()) item.unsupported("SpecialToken, Sequence");
    const Node ids = specials.at(name.str()).at("ids");
    if (!ids.j.is_array()) ids.fail("must list the ids of special token " + name.str());
    for (size_t k = 0; k < ids.j.size(); ++k)
      (seen_a ? c->template_suffix : c->template_prefix).push_back(ids.at(k).id());
  }
  if (!seen_a) single.fail("has no {\"Sequence\": {\"id\": \"A\"}}");
}

void read_post_processor(const Node& n, HfConfig* c) {
  if (n.j.is_null()) return;
  const Node type = n.at("type");
  const std::string t = type.str();
  if (t == "ByteLevel") return;  // offsets only
  if (t == "TemplateProcessing") {
    if (!c->template_prefix.empty() || !c->template_suffix.empty()) n.unsupported("one template");
    return read_template(n, c);
  }
  if (t != "Sequence") type.unsupported("null, ByteLevel, TemplateProcessing, Sequence");
  const Node seq = n.at("processors");
  if (!seq.j.is_array()) seq.fail("must be an array");
  for (size_t i = 0; i < seq.j.size(); ++i) read_post_processor(seq.at(i), c);
}

// The id tokenizers gives an added token, whatever the file says (it warns
// and goes on when they differ): an earlier added token's with that text,
// else the model's token with that text as its vocab key, else the next id
// after the vocabulary (its entry count) and the added tokens given so far.
int64_t tokenizers_id(const std::string& content, const json& vocab,
                      const std::vector<HfAddedToken>& added, int64_t* max_added) {
  for (const HfAddedToken& b : added)
    if (b.content == content) return b.id;
  const auto it = vocab.find(content);
  const int64_t id = it != vocab.end()                                  ? it->get<int64_t>()
                     : *max_added >= static_cast<int64_t>(vocab.size()) ? *max_added + 1
                                                                        : vocab.size();
  *max_added = std::max(*max_added, id);
  return id;
}

void read_added_tokens(const Node& n, const json& vocab, HfConfig* c) {
  if (n.j.is_null()) return;
  if (!n.j.is_array()) n.fail("must be an array");
  int64_t max_added = -1;
  for (size_t i = 0; i < n.j.size(); ++i) {
    const Node t = n.at(i);
    HfAddedToken a{t.at("content").str(), t.at("id").id(), t.at("special").flag(false)};
    if (a.content.empty()) t.at("content").fail("must not be empty");
    for (const char* key : {"lstrip", "rstrip", "single_word"})
      if (t.at(key).flag(false)) t.at(key).unsupported("false");
    if (c->nfc && t.at("normalized").flag(!a.special)) t.at("normalized").unsupported("false");
    // The file's id must be the one tokenizers would give it.
    const int64_t expected = tokenizers_id(a.content, vocab, c->added, &max_added);
    if (a.id != expected)
      t.at("id").fail(strf("%d is not the id tokenizers gives this token (%lld)", a.id,
                           static_cast<long long>(expected)));
    // A token of the model must be that token (tokenizers would decode the
    // model's token as the added one's text); any other decodes to its content.
    const bool in_model =
        static_cast<size_t>(a.id) < c->vocab.tokens.size() && !c->vocab.tokens[a.id].empty();
    for (const HfAddedToken& b : c->added)
      if (b.id == a.id && b.content != a.content)
        t.at("id").fail(strf("%d is also the id of added token ", a.id) + b.content);
    if (in_model && c->vocab.tokens[a.id] != a.content)
      t.at("id").fail(strf("%d is the model's token for other text than ", a.id) + a.content);
    if (!in_model) c->vocab.specials.emplace_back(a.content, a.id);
    c->added.push_back(std::move(a));
  }
  for (const char* eot : {"<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>"}) {
    for (const HfAddedToken& a : c->added)
      if (a.special && a.content == eot && c->eot_id < 0) c->eot_id = a.id;
  }
}

}  // namespace

HfConfig read_hf_tokenizer_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open tokenizer file " + path);
  std::ostringstream buf;
  buf << in.rdbuf();
  json j;
  try {
    j = json::parse(buf.str());
  } catch (const json::exception& e) {
    throw Error(path + ": invalid JSON: " + e.what());
  }
  const Node root{path, j, ""};
  if (!j.is_object()) root.fail("must be an object");
  root.expect("truncation", nullptr);
  root.expect("padding", nullptr);
  HfConfig c;
  c.vocab.name = "hf:" + path;
  c.vocab.source = path;
  read_model(root.at("model"), &c);
  read_normalizer(root.at("normalizer"), &c);
  read_pre_tokenizer(root.at("pre_tokenizer"), &c);
  read_post_processor(root.at("post_processor"), &c);
  const Node decoder = root.at("decoder");
  if (!decoder.j.is_null() && decoder.at("type").str() != "ByteLevel")
    decoder.at("type").unsupported("null, ByteLevel");
  read_added_tokens(root.at("added_tokens"), root.at("model").at("vocab").j, &c);
  // The template's ids must be tokens: of the model or added.
  for (const auto* ids : {&c.template_prefix, &c.template_suffix}) {
    for (const int32_t id : *ids) {
      bool known = static_cast<size_t>(id) < c.vocab.tokens.size() && !c.vocab.tokens[id].empty();
      for (const HfAddedToken& a : c.added) known |= a.id == id;
      if (!known)
        root.at("post_processor")
            .fail(strf("adds id %d, which is neither a token nor an added token", id));
    }
  }
  return c;
}

}  // namespace meshloom::tokenizer
