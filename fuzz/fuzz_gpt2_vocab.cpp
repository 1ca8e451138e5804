// The GPT-2 vocabulary reader (lib/tokenizer/vocab_files): the input is
// encoder.json, a NUL, then vocab.bpe. A vocabulary that reads is built into
// a BPE model and encodes and decodes a short text.
#include <memory>
#include <string>

#include "fuzz/vocab_common.hpp"
#include "tokenizer/vocab_files.hpp"

using namespace meshloom;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::init();
  const auto [encoder, merges] = fuzz::split_at_nul(fuzz::bytes(data, size));
  const std::string enc = fuzz::write_file("encoder.json", encoder);
  const std::string bpe = fuzz::write_file("vocab.bpe", merges);
  tokenizer::BpeVocab vocab;
  try {
    vocab = tokenizer::read_gpt2_vocab(enc, bpe);
  } catch (const Error& e) {
    fuzz::expect_names(e, {enc, bpe});
    return 0;
  }
  fuzz::encode_decode(std::move(vocab), enc);
  return 0;
}
