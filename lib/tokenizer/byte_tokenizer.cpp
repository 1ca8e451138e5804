// The byte-level tokenizer: id = byte value, end-of-text = 256.
#include "tokenizer/byte_tokenizer.hpp"

namespace meshloom::tokenizer {

std::vector<int32_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
  return ids;
}

std::string ByteTokenizer::decode(const int32_t* ids, size_t n) const {
  std::string out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i)
    if (ids[i] >= 0 && ids[i] < 256) out.push_back(static_cast<char>(ids[i]));
  return out;
}

}  // namespace meshloom::tokenizer
