// Class tables for unicode_class.hpp: ASCII by hand, the rest from ICU, held
// to Unicode 16.0, the version of the regex crate in tiktoken: the ids of a
// text must not change with the machine's ICU.
#include "tokenizer/unicode_class.hpp"

#include <unicode/uchar.h>
#include <unicode/uversion.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

// Older ICUs lack the Unicode 15.0 additions, which unicode_additions.inc omits.
static_assert(U_ICU_VERSION_MAJOR_NUM >= 72, "ICU 72 (Unicode 15.0) or newer needed");

namespace meshloom::tokenizer::unicode {
namespace {

constexpr uint8_t kN = kNumber, kS = kSpace;
constexpr uint8_t kUp = kLetter | kUpperish;  // A-Z
constexpr uint8_t kLo = kLetter | kLowerish;  // a-z
constexpr uint8_t kUpperLetter = kUp, kLowerLetter = kLo;
constexpr uint8_t kOtherLetter = kLetter | kUpperish | kLowerish;  // Lo, Lm
constexpr uint8_t kMark = kUpperish | kLowerish;

// Letters, marks and numbers new in Unicode 15.1 and 16.0, for an ICU that
// predates them (Debian 12's ICU 72 is Unicode 15.0): unassigned there, they
// would split like punctuation where tiktoken keeps them in a word.
struct Added {
  uint32_t first, last;
  uint8_t bits;
};
constexpr Added kAdded[] = {
#include "tokenizer/unicode_additions.inc"
};

uint8_t added_class(uint32_t cp) {
  const Added* it = std::upper_bound(std::begin(kAdded), std::end(kAdded), cp,
                                     [](uint32_t c, const Added& a) { return c < a.first; });
  return it != std::begin(kAdded) && cp <= (it - 1)->last ? (it - 1)->bits : 0;
}

uint8_t icu_class(uint32_t cp) {
  const auto c = static_cast<UChar32>(cp);
  if (u_charType(c) == U_UNASSIGNED) return added_class(cp);
  UVersionInfo age;
  u_charAge(c, age);
  if (age[0] > 16) return 0;  // a newer ICU's code point: unassigned for tiktoken
  uint8_t bits = u_isUWhiteSpace(c) ? kSpace : 0;
  switch (u_charType(c)) {
    case U_UPPERCASE_LETTER:
    case U_TITLECASE_LETTER:
      return bits | kLetter | kUpperish;
    case U_LOWERCASE_LETTER:
      return bits | kLetter | kLowerish;
    case U_MODIFIER_LETTER:
    case U_OTHER_LETTER:
      return bits | kLetter | kUpperish | kLowerish;
    case U_NON_SPACING_MARK:
    case U_ENCLOSING_MARK:
    case U_COMBINING_SPACING_MARK:
      return bits | kUpperish | kLowerish;
    case U_DECIMAL_DIGIT_NUMBER:
    case U_LETTER_NUMBER:
    case U_OTHER_NUMBER:
      return bits | kNumber;
    default:
      return bits;
  }
}

// Two levels: blocks of 128 code points, identical blocks shared (most of the
// 0x110000 code points fall in a few dozen distinct blocks), about 60 KiB.
constexpr int kBlockBits = 7;
constexpr uint32_t kBlock = 1u << kBlockBits;
constexpr uint32_t kMaxCp = 0x110000;

struct Table {
  std::vector<uint16_t> index;  // cp >> kBlockBits -> block number
  std::vector<uint8_t> blocks;  // block number * kBlock + (cp & (kBlock - 1)) -> bits
  Table() {
    index.resize(kMaxCp / kBlock);
    std::map<std::string, uint16_t> seen;
    std::string block(kBlock, '\0');
    for (uint32_t b = 0; b < kMaxCp / kBlock; ++b) {
      for (uint32_t i = 0; i < kBlock; ++i) {
        const uint32_t cp = b * kBlock + i;
        block[i] = static_cast<char>(cp < 128 ? kAsciiClass[cp] : icu_class(cp));
      }
      auto [it, fresh] = seen.emplace(block, static_cast<uint16_t>(seen.size()));
      if (fresh) blocks.insert(blocks.end(), block.begin(), block.end());
      index[b] = it->second;
    }
  }
  uint8_t get(uint32_t cp) const {
    return blocks[static_cast<size_t>(index[cp >> kBlockBits]) * kBlock + (cp & (kBlock - 1))];
  }
};

const Table& table() {
  static const Table t;  // built once, thread-safe (magic static)
  return t;
}

inline bool cont(uint8_t b) { return (b & 0xC0) == 0x80; }

}  // namespace

// clang-format off
const uint8_t kAsciiClass[128] = {
  0, 0, 0, 0, 0, 0, 0, 0, 0, kS, kS | kNewline, kS, kS, kS | kNewline, 0, 0,  // \t \n \v \f \r
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  kS, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,                               // space
  kN, kN, kN, kN, kN, kN, kN, kN, kN, kN, 0, 0, 0, 0, 0, 0,                      // 0-9
  0, kUp, kUp, kUp, kUp, kUp, kUp, kUp, kUp, kUp, kUp, kUp, kUp, kUp, kUp, kUp,  // A-O
  kUp, kUp, kUp, kUp, kUp, kUp, kUp, kUp, kUp, kUp, kUp, 0, 0, 0, 0, 0,          // P-Z
  0, kLo, kLo, kLo, kLo, kLo, kLo, kLo, kLo, kLo, kLo, kLo, kLo, kLo, kLo, kLo,  // a-o
  kLo, kLo, kLo, kLo, kLo, kLo, kLo, kLo, kLo, kLo, kLo, 0, 0, 0, 0, 0,          // p-z
};
// clang-format on

uint8_t class_of(uint32_t cp) {
  if (cp < 128) return kAsciiClass[cp];
  return cp < kMaxCp ? table().get(cp) : 0;
}

CodePoint decode_non_ascii(const uint8_t* p, size_t n) {
  constexpr CodePoint kInvalid{0, 1};
  const uint8_t b0 = p[0];
  if (b0 < 0xC2 || b0 > 0xF4) return kInvalid;  // continuation, overlong C0/C1, > U+10FFFF
  if (b0 < 0xE0) {
    if (n < 2 || !cont(p[1])) return kInvalid;
    return {table().get(((b0 & 0x1Fu) << 6) | (p[1] & 0x3Fu)), 2};
  }
  if (b0 < 0xF0) {
    if (n < 3 || !cont(p[1]) || !cont(p[2])) return kInvalid;
    if (b0 == 0xE0 && p[1] < 0xA0) return kInvalid;  // overlong
    if (b0 == 0xED && p[1] > 0x9F) return kInvalid;  // surrogates
    const uint32_t cp = ((b0 & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
    return {table().get(cp), 3};
  }
  if (n < 4 || !cont(p[1]) || !cont(p[2]) || !cont(p[3])) return kInvalid;
  if (b0 == 0xF0 && p[1] < 0x90) return kInvalid;  // overlong
  if (b0 == 0xF4 && p[1] > 0x8F) return kInvalid;  // > U+10FFFF
  const uint32_t cp =
      ((b0 & 0x07u) << 18) | ((p[1] & 0x3Fu) << 12) | ((p[2] & 0x3Fu) << 6) | (p[3] & 0x3Fu);
  return {table().get(cp), 4};
}

}  // namespace meshloom::tokenizer::unicode
