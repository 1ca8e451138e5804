// Hugging Face tokenizer.json tokenizers (spec "hf:PATH"): byte-level BPE as
// in Llama 3 and Qwen2/Qwen3, run by the BPE engine of bpe.hpp.
//
// Supported (anything else is refused at load by one meshloom::Error that
// names the file and the JSON pointer of the first unsupported value):
//   model          BPE: "vocab" in the byte-level alphabet, "merges" as
//                  "a b" strings or [a, b] arrays, ignore_merges either way;
//                  no dropout, byte_fallback, subword prefix or word suffix
//   normalizer     null or NFC (nfc.hpp)
//   pre_tokenizer  Sequence[Split(Regex, Isolated), ByteLevel(use_regex
//                  false)] with the regex of GPT-2, cl100k/Llama 3, Qwen2/3
//                  or o200k (pretokenizer.hpp); or ByteLevel(use_regex true),
//                  GPT-2's pattern; never add_prefix_space
//   post_processor null, ByteLevel, TemplateProcessing (its "single"
//                  template), or a Sequence of those
//   decoder        null or ByteLevel
//   added_tokens   matched in the text (leftmost, longest), never lstrip,
//                  rstrip or single_word; normalized only without normalizer;
//                  each id the one tokenizers gives it (the model's token of
//                  that text, else the next after the vocabulary and the added
//                  tokens before it), where tokenizers would only warn
//   truncation, padding: null
//
// Encoding follows tokenizers' order: added tokens are cut out of the raw
// text, each remaining segment is normalized, split and merged.
//   encode(text)               special added tokens are ordinary text (a
//                              document cannot forge a boundary); non-special
//                              ones (Qwen3's <think>) are matched, as in HF
//   encode_with_special(t, S)  also the special tokens named in S
//   encode_templated(text)     tokenizers' encode(text, add_special_tokens=
//                              true): every special token is matched, and the
//                              post-processor's template adds its tokens
//                              (Llama 3.1: <|begin_of_text|> first)
// The end-of-text id (eot_id) is the first special token among
// <|endoftext|>, <|end_of_text|>, </s>, <eos>; -1 when none.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/bpe.hpp"

namespace meshloom::tokenizer {

struct HfAddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;
};

// What a tokenizer.json holds, checked.
struct HfConfig {
  BpeVocab vocab;
  bool nfc = false;
  std::vector<HfAddedToken> added;
  std::vector<int32_t> template_prefix, template_suffix;  // around the text
  int32_t eot_id = -1;
};

// Reads and checks `path`; throws meshloom::Error "PATH: /json/pointer ...".
HfConfig read_hf_tokenizer_json(const std::string& path);

class HfModel;

// The tokenizer of the tokenizer.json at `path`, named `spec`; the loaded
// model is shared while any tokenizer of the same file uses it.
std::unique_ptr<Tokenizer> make_hf_tokenizer(const std::string& spec, const std::string& path);

class HfTokenizer final : public Tokenizer {
 public:
  HfTokenizer(std::string name, std::shared_ptr<const HfModel> model);
  ~HfTokenizer() override;

  std::vector<int32_t> encode(std::string_view text) const override;
  std::vector<int32_t> encode_with_special(
      std::string_view text, const std::vector<std::string>& allowed_special) const override;
  std::vector<int32_t> encode_templated(std::string_view text) const override;
  std::string decode(const int32_t* ids, size_t n) const override;
  using Tokenizer::decode;
  int32_t vocab_size() const override;
  int32_t eot_id() const override;
  std::string name() const override;

  // The contents of the special added tokens, in file order.
  std::vector<std::string> special_tokens() const;

 private:
  std::string name_;
  std::shared_ptr<const HfModel> model_;
};

}  // namespace meshloom::tokenizer
