// The tokenizer vocabulary harnesses: a vocabulary that reads must build
// into a model that encodes and decodes.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "fuzz/harness.hpp"
#include "tokenizer/bpe.hpp"

namespace meshloom::fuzz {

// Encodes a fixed text (ASCII, accents, CJK, emoji, digits, spaces) and
// decodes it back: the ids must be in the vocabulary and give the text back.
inline void encode_decode(tokenizer::BpeVocab vocab, const std::string& file) {
  std::shared_ptr<const tokenizer::BpeModel> model;
  try {
    model = tokenizer::build_bpe_model(std::move(vocab));
  } catch (const Error& e) {
    fuzz::expect_names(e, {file});
    return;
  }
  tokenizer::BpeTokenizer tok(model);
  const std::string text =
      "Hello, w\xc3\xb6rld! 12345  \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80\n\tend";
  try {
    const std::vector<int32_t> ids = tok.encode(text);
    for (int32_t id : ids)
      if (id < 0 || id >= tok.vocab_size()) fuzz::finding("an id outside the vocabulary");
    if (tok.decode(ids) != text) fuzz::finding("decode(encode(text)) is not the text");
  } catch (const Error& e) {
    fuzz::expect_names(e, {file});
  }
}

}  // namespace meshloom::fuzz
