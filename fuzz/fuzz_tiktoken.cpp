// The tiktoken vocabulary readers (lib/tokenizer/vocab_files): the first byte
// picks the file's name and so its form (NAME.tiktoken: "BASE64 RANK" lines,
// the split pattern known by NAME; NAME.json: npm tiktoken's {"pat_str",
// "special_tokens", "bpe_ranks"}); the rest is the file. A vocabulary that
// reads is built into a BPE model and encodes and decodes a short text.
#include <memory>
#include <string>

#include "fuzz/vocab_common.hpp"
#include "tokenizer/vocab_files.hpp"

using namespace meshloom;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::init();
  if (size < 1) return 0;
  static const char* const kNames[] = {
      "cl100k_base.tiktoken", "o200k_base.tiktoken", "r50k_base.tiktoken",
      "cl100k_base.json",     "gpt2.json",           "unknown.tiktoken"};
  const std::string name = kNames[data[0] % 6];
  const std::string path = fuzz::write_file(name, fuzz::bytes(data + 1, size - 1));
  tokenizer::BpeVocab vocab;
  try {
    vocab = tokenizer::read_tiktoken_vocab(path);
  } catch (const Error& e) {
    fuzz::expect_names(e, {path});
    return 0;
  }
  fuzz::encode_decode(std::move(vocab), path);
  return 0;
}
