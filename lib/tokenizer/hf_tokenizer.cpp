// HfTokenizer (see hf_tokenizer.hpp): added-token matching, NFC and the
// template around the byte-level BPE of bpe.hpp.
#include "tokenizer/hf_tokenizer.hpp"

#include <cstring>
#include <map>
#include <mutex>

#include "base/check.hpp"
#include "tokenizer/nfc.hpp"

namespace meshloom::tokenizer {
namespace {

// Leftmost-longest matching of a set of added tokens, as tokenizers'
// AddedVocabulary (an Aho-Corasick automaton in LeftmostLongest mode) does.
class AddedMatcher {
 public:
  void add(const std::string& content, int32_t id) {
    tokens_.emplace_back(content, id);
    const auto first = static_cast<uint8_t>(content[0]);
    if (!starts_[first]) ++distinct_starts_, only_start_ = first;
    starts_[first] = true;
  }
  bool empty() const { return tokens_.empty(); }

  // The first match at or after `from`: its position (npos: none), length, id.
  size_t find(std::string_view text, size_t from, size_t* len, int32_t* id) const {
    const auto* s = reinterpret_cast<const uint8_t*>(text.data());
    for (size_t i = from; i < text.size(); ++i) {
      if (distinct_starts_ == 1) {  // most files: every added token starts with '<'
        const void* hit = std::memchr(s + i, only_start_, text.size() - i);
        if (!hit) return std::string_view::npos;
        i = static_cast<const uint8_t*>(hit) - s;
      } else if (!starts_[s[i]]) {
        continue;
      }
      *len = 0;
      for (const auto& [content, tid] : tokens_)
        if (content.size() > *len && text.substr(i).starts_with(content))
          *len = content.size(), *id = tid;
      if (*len) return i;
    }
    return std::string_view::npos;
  }

 private:
  std::vector<std::pair<std::string, int32_t>> tokens_;
  bool starts_[256] = {};
  int distinct_starts_ = 0;
  uint8_t only_start_ = 0;
};

}  // namespace

class HfModel {
 public:
  explicit HfModel(HfConfig c)
      : bpe(build_bpe_model(std::move(c.vocab))),
        nfc(c.nfc),
        added(std::move(c.added)),
        template_prefix(std::move(c.template_prefix)),
        template_suffix(std::move(c.template_suffix)),
        eot_id(c.eot_id) {
    for (const HfAddedToken& a : added) {
      if (!a.special) ordinary.add(a.content, a.id);
      all.add(a.content, a.id);
    }
  }

  // Appends the ids of `text`, the added tokens of `m` cut out first.
  void encode_append(std::string_view text, const AddedMatcher& m,
                     std::vector<int32_t>* out) const {
    if (m.empty()) return encode_segment(text, out);
    size_t pos = 0, len = 0;
    int32_t id = -1;
    for (size_t at; (at = m.find(text, pos, &len, &id)) != std::string_view::npos;) {
      encode_segment(text.substr(pos, at - pos), out);
      out->push_back(id);
      pos = at + len;
    }
    encode_segment(text.substr(pos), out);
  }

  BpeTokenizer bpe;
  bool nfc = false;
  std::vector<HfAddedToken> added;
  std::vector<int32_t> template_prefix, template_suffix;
  int32_t eot_id = -1;
  AddedMatcher ordinary;  // the non-special added tokens
  AddedMatcher all;       // every added token

 private:
  void encode_segment(std::string_view text, std::vector<int32_t>* out) const {
    if (text.empty()) return;
    if (!nfc || !nfc_may_change(text)) return bpe.encode_append(text, out);
    thread_local std::string normalized;
    tokenizer::nfc(text, &normalized);
    bpe.encode_append(normalized, out);
    if (normalized.capacity() > (1u << 24)) std::string().swap(normalized);  // keep no huge buffer
  }
};

std::unique_ptr<Tokenizer> make_hf_tokenizer(const std::string& spec, const std::string& path) {
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<const HfModel>> models;
  std::shared_ptr<const HfModel> model;
  {
    std::lock_guard<std::mutex> lock(mu);
    model = models[path].lock();
    if (!model) {
      model = std::make_shared<const HfModel>(read_hf_tokenizer_json(path));
      models[path] = model;
    }
  }
  return std::make_unique<HfTokenizer>(spec, std::move(model));
}

HfTokenizer::HfTokenizer(std::string name, std::shared_ptr<const HfModel> model)
    : name_(std::move(name)), model_(std::move(model)) {}
HfTokenizer::~HfTokenizer() = default;

std::vector<int32_t> HfTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 8);
  model_->encode_append(text, model_->ordinary, &ids);
  return ids;
}

std::vector<int32_t> HfTokenizer::encode_with_special(
    std::string_view text, const std::vector<std::string>& allowed_special) const {
  if (allowed_special.empty()) return encode(text);
  AddedMatcher m;
  for (const std::string& name : allowed_special) {
    bool found = false;
    for (const HfAddedToken& a : model_->added)
      if (a.special && a.content == name) m.add(a.content, a.id), found = true;
    if (!found) throw Error("tokenizer '" + name_ + "' has no special token '" + name + "'");
  }
  for (const HfAddedToken& a : model_->added)
    if (!a.special) m.add(a.content, a.id);
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 8);
  model_->encode_append(text, m, &ids);
  return ids;
}

std::vector<int32_t> HfTokenizer::encode_templated(std::string_view text) const {
  std::vector<int32_t> ids = model_->template_prefix;
  ids.reserve(text.size() / 3 + 8 + model_->template_suffix.size());
  model_->encode_append(text, model_->all, &ids);
  ids.insert(ids.end(), model_->template_suffix.begin(), model_->template_suffix.end());
  return ids;
}

std::string HfTokenizer::decode(const int32_t* ids, size_t n) const {
  return model_->bpe.decode(ids, n);
}

int32_t HfTokenizer::vocab_size() const { return model_->bpe.vocab_size(); }
int32_t HfTokenizer::eot_id() const { return model_->eot_id; }
std::string HfTokenizer::name() const { return name_; }

std::vector<std::string> HfTokenizer::special_tokens() const {
  std::vector<std::string> names;
  for (const HfAddedToken& a : model_->added)
    if (a.special) names.push_back(a.content);
  return names;
}

}  // namespace meshloom::tokenizer
