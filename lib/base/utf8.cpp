// UTF-8 validation and repair (see utf8.hpp for the replacement rule).
#include "base/utf8.hpp"

#include <cstdint>
#include <cstring>

namespace meshloom {

namespace {

// Length of the valid character starting at p (1..4), or 0 if the bytes there
// do not begin a valid character. *subpart receives the length of the maximal
// subpart (the prefix that could still have been valid, at least 1) when
// invalid.
size_t char_length(const unsigned char* p, const unsigned char* end, size_t* subpart) {
  const unsigned char b = p[0];
  size_t n;
  unsigned char lo = 0x80, hi = 0xBF;  // range allowed for the second byte
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) {
    n = 2;
  } else if (b >= 0xE0 && b <= 0xEF) {
    n = 3;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    n = 4;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;
  } else {
    *subpart = 1;
    return 0;
  }
  size_t k = 1;
  for (; k < n; ++k) {
    if (p + k >= end) break;
    const unsigned char c = p[k];
    const unsigned char want_lo = k == 1 ? lo : 0x80, want_hi = k == 1 ? hi : 0xBF;
    if (c < want_lo || c > want_hi) break;
  }
  if (k == n) return n;
  *subpart = k;
  return 0;
}

bool ascii8(const unsigned char* p) {
  uint64_t w;
  std::memcpy(&w, p, 8);
  return (w & 0x8080808080808080ull) == 0;
}

}  // namespace

size_t valid_utf8_prefix(std::string_view text) {
  const unsigned char* begin = reinterpret_cast<const unsigned char*>(text.data());
  const unsigned char* p = begin;
  const unsigned char* end = begin + text.size();
  while (p < end) {
    while (end - p >= 8 && ascii8(p)) p += 8;
    if (p >= end) break;
    size_t subpart = 0;
    const size_t n = char_length(p, end, &subpart);
    if (n == 0) break;
    p += n;
  }
  return static_cast<size_t>(p - begin);
}

size_t sanitize_utf8(std::string* text) {
  size_t pos = valid_utf8_prefix(*text);
  if (pos == text->size()) return 0;
  std::string out;
  out.reserve(text->size() + 16);
  out.append(*text, 0, pos);
  const unsigned char* begin = reinterpret_cast<const unsigned char*>(text->data());
  const unsigned char* p = begin + pos;
  const unsigned char* end = begin + text->size();
  size_t replaced = 0;
  while (p < end) {
    size_t subpart = 0;
    const size_t n = char_length(p, end, &subpart);
    if (n > 0) {
      out.append(reinterpret_cast<const char*>(p), n);
      p += n;
    } else {
      out.append("\xEF\xBF\xBD");
      ++replaced;
      p += subpart;
    }
  }
  text->swap(out);
  return replaced;
}

}  // namespace meshloom
