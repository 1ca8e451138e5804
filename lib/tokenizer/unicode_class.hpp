// Unicode character classes for the BPE pre-tokenizers.
//
// The GPT-2, cl100k and o200k split patterns test each code point for \p{L},
// \p{N}, \s and (o200k) letter case and marks. decode() reads one UTF-8 code
// point and returns its class bits: ASCII is a 128-entry table, the rest a
// two-level table built once from ICU, so the hot loop never calls ICU. The
// classes are Unicode 16.0's, as in tiktoken's regex crate, whatever the ICU
// version (unicode_class.cpp).
//
// \s is Unicode White_Space, as in Rust's regex crate that tiktoken uses (JS
// \s differs on U+0085 and U+FEFF; we follow tiktoken).
// Invalid UTF-8 (a stray continuation byte, a truncated or overlong sequence, a
// surrogate) decodes as a 1-byte code point with no class bit, i.e. like
// punctuation, so every byte still reaches the BPE and decodes back unchanged.
#pragma once

#include <cstddef>
#include <cstdint>

namespace meshloom::tokenizer::unicode {

enum : uint8_t {
  kLetter = 1,     // \p{L}
  kNumber = 2,     // \p{N}
  kSpace = 4,      // \s
  kUpperish = 8,   // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]  (o200k)
  kLowerish = 16,  // [\p{Ll}\p{Lm}\p{Lo}\p{M}]        (o200k)
  kNewline = 32,   // \r or \n
};

struct CodePoint {
  uint8_t cls;  // class bits above
  uint8_t len;  // bytes, 1..4
};

extern const uint8_t kAsciiClass[128];

// Class bits of a code point (0 for values above U+10FFFF).
uint8_t class_of(uint32_t cp);

// p[0] >= 0x80 and n >= 1 bytes are readable.
CodePoint decode_non_ascii(const uint8_t* p, size_t n);

// The code point starting at p (n >= 1 bytes readable).
inline CodePoint decode(const uint8_t* p, size_t n) {
  return p[0] < 0x80 ? CodePoint{kAsciiClass[p[0]], 1} : decode_non_ascii(p, n);
}

}  // namespace meshloom::tokenizer::unicode
