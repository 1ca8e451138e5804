// make_tokenizer: the spec string to a tokenizer.
#include "base/check.hpp"
#include "tokenizer/byte_tokenizer.hpp"

namespace meshloom {

std::unique_ptr<Tokenizer> make_tokenizer(const std::string& spec) {
  if (spec == "byte") return std::make_unique<ByteTokenizer>();
  throw Error("unknown tokenizer '" + spec + "' (byte, gpt2, tiktoken:FILE)");
}

}  // namespace meshloom
