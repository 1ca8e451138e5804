// One id per byte; 256 is end-of-text. Needs no vocabulary file.
#pragma once

#include "tokenizer/tokenizer.hpp"

namespace meshloom::tokenizer {

class ByteTokenizer final : public Tokenizer {
 public:
  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(const int32_t* ids, size_t n) const override;
  using Tokenizer::decode;
  int32_t vocab_size() const override { return 257; }
  int32_t eot_id() const override { return 256; }
  std::string name() const override { return "byte"; }
};

}  // namespace meshloom::tokenizer
