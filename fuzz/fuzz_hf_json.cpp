// The Hugging Face tokenizer.json reader (lib/tokenizer/hf_json.cpp): the
// input is the file. One that loads must encode a fixed text (ASCII, accents
// in both forms, CJK, emoji, an added token's and a special token's text)
// into ids in range, with and without special tokens and the template, and
// decode it back (to its NFC when the file normalizes).
#include <memory>
#include <string>

#include "fuzz/harness.hpp"
#include "tokenizer/hf_tokenizer.hpp"
#include "tokenizer/nfc.hpp"

using namespace meshloom;

namespace {

void check_ids(const tokenizer::Tokenizer& tok, const std::vector<int32_t>& ids) {
  for (const int32_t id : ids)
    if (id < 0 || id >= tok.vocab_size()) fuzz::finding("an id outside the vocabulary");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::init();
  const std::string path = fuzz::write_file("tokenizer.json", fuzz::bytes(data, size));
  std::unique_ptr<tokenizer::Tokenizer> tok;
  try {
    tok = tokenizer::make_hf_tokenizer("hf:" + path, path);
  } catch (const Error& e) {
    fuzz::expect_names(e, {path});
    return 0;
  }
  const std::string text =
      "Hello, w\xc3\xb6rld! e\xcc\x81 12345  \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80\n\tend "
      "<x> <|endoftext|>";
  const auto& hf = dynamic_cast<const tokenizer::HfTokenizer&>(*tok);
  const std::vector<int32_t> ids = tok->encode(text);
  check_ids(*tok, ids);
  check_ids(*tok, tok->encode_with_special(text, hf.special_tokens()));
  check_ids(*tok, tok->encode_templated(text));
  std::string normalized;
  tokenizer::nfc(text, &normalized);
  const std::string back = tok->decode(ids);
  if (back != text && back != normalized) fuzz::finding("decode(encode(text)) is not the text");
  return 0;
}
