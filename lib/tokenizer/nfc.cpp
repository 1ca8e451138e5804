// NFC from the tables of nfc_tables.inc (see nfc.hpp): decompose, order
// marks by combining class, recompose (Unicode Standard, section 3.11),
// run on the stretches of text around characters that may change.
#include "tokenizer/nfc.hpp"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <vector>

namespace meshloom::tokenizer {
namespace {

struct DecompEntry {
  uint32_t cp;
  uint16_t offset;
  uint8_t length;
};
struct ComposeEntry {
  uint32_t first, second, composite;
};
#include "tokenizer/nfc_tables.inc"
static_assert(std::size(kDecompData) < 65536, "DecompEntry::offset is 16 bits");

// Hangul syllables compose and decompose by arithmetic.
constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount;
constexpr uint32_t kSCount = kLCount * kNCount;

uint8_t ccc_of(uint32_t cp) {
  if (cp < 0x300) return 0;
  const uint32_t* it = std::lower_bound(std::begin(kCcc), std::end(kCcc), cp << 8);
  return it != std::end(kCcc) && (*it >> 8) == cp ? static_cast<uint8_t>(*it & 0xFF) : 0;
}

const DecompEntry* decomposition(uint32_t cp) {
  const auto* it = std::lower_bound(std::begin(kDecomp), std::end(kDecomp), cp,
                                    [](const DecompEntry& e, uint32_t c) { return e.cp < c; });
  return it != std::end(kDecomp) && it->cp == cp ? it : nullptr;
}

// The composite of (a, b), or 0.
uint32_t compose_pair(uint32_t a, uint32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase &&
      b < kTBase + kTCount)
    return a + (b - kTBase);
  const ComposeEntry key{a, b, 0};
  const auto* it =
      std::lower_bound(std::begin(kCompose), std::end(kCompose), key,
                       [](const ComposeEntry& x, const ComposeEntry& y) {
                         return x.first != y.first ? x.first < y.first : x.second < y.second;
                       });
  return it != std::end(kCompose) && it->first == a && it->second == b ? it->composite : 0;
}

// Per BMP code point: may NFC change it or combine it with the one before?
// (a combining class, a decomposition, or the second of a composite.)
// Supplementary code points are looked up each time.
class Inert {
 public:
  Inert() : bmp_(0x10000, 1) {
    for (uint32_t e : kCcc) mark(e >> 8);
    for (const DecompEntry& e : kDecomp) mark(e.cp);
    for (const ComposeEntry& e : kCompose) mark(e.second), seconds_.push_back(e.second);
    for (uint32_t cp = kSBase; cp < kSBase + kSCount; ++cp) mark(cp);
    for (uint32_t cp = kVBase; cp < kTBase + kTCount; ++cp) mark(cp);  // V and T jamo
    std::sort(seconds_.begin(), seconds_.end());
  }
  bool operator()(uint32_t cp) const {
    if (cp < 0x10000) return bmp_[cp];
    return ccc_of(cp) == 0 && !decomposition(cp) &&
           !std::binary_search(seconds_.begin(), seconds_.end(), cp);
  }

 private:
  void mark(uint32_t cp) {
    if (cp < 0x10000) bmp_[cp] = 0;
  }
  std::vector<uint8_t> bmp_;
  std::vector<uint32_t> seconds_;
};

void append_utf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// The code point at s[i] and its length; length 0 for invalid UTF-8.
uint32_t next_cp(const uint8_t* s, size_t n, size_t i, size_t* len) {
  const uint8_t b = s[i];
  *len = 0;
  if (b < 0x80) return *len = 1, b;
  const size_t k = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC2 ? 2 : 0;
  if (k == 0 || b > 0xF4 || i + k > n) return 0;
  uint32_t cp = b & (0x7F >> k);
  for (size_t j = 1; j < k; ++j) {
    if ((s[i + j] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (s[i + j] & 0x3F);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[k] || cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000)) return 0;
  *len = k;
  return cp;
}

// NFC of the code points `cps` (decomposed, ordered, recomposed), appended.
void normalize(std::vector<uint32_t>& cps, std::string* out) {
  thread_local std::vector<uint32_t> d;
  d.clear();
  for (const uint32_t cp : cps) {
    if (cp >= kSBase && cp < kSBase + kSCount) {
      const uint32_t s = cp - kSBase;
      d.push_back(kLBase + s / kNCount);
      d.push_back(kVBase + (s % kNCount) / kTCount);
      if (s % kTCount) d.push_back(kTBase + s % kTCount);
    } else if (const DecompEntry* e = decomposition(cp)) {
      d.insert(d.end(), kDecompData + e->offset, kDecompData + e->offset + e->length);
    } else {
      d.push_back(cp);
    }
  }
  // Canonical order: a stable sort of each run of non-zero classes.
  for (size_t i = 1; i < d.size(); ++i) {
    const uint8_t c = ccc_of(d[i]);
    if (c == 0) continue;
    for (size_t j = i; j > 0 && ccc_of(d[j - 1]) > c; --j) std::swap(d[j], d[j - 1]);
  }
  // Composition: each character joins the last starter unless blocked.
  size_t starter = SIZE_MAX, kept = 0;
  int last_ccc = -1;
  for (size_t i = 0; i < d.size(); ++i) {
    const uint8_t c = ccc_of(d[i]);
    if (starter != SIZE_MAX && (last_ccc < c || (last_ccc == 0 && kept == starter + 1))) {
      if (const uint32_t comp = compose_pair(d[starter], d[i])) {
        d[starter] = comp;
        continue;
      }
    }
    if (c == 0) starter = kept;
    last_ccc = c;
    d[kept++] = d[i];
  }
  for (size_t i = 0; i < kept; ++i) append_utf8(d[i], out);
}

}  // namespace

bool nfc_may_change(std::string_view text) {
  for (const char c : text)
    if (static_cast<uint8_t>(c) >= 0xCC) return true;
  return false;
}

void nfc(std::string_view text, std::string* out) {
  static const Inert inert;
  out->clear();
  out->reserve(text.size() + 16);
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  // Pending: the characters since the last inert one (that one included, as
  // it may be the first of a composite), to normalize together.
  std::vector<uint32_t> pending;
  size_t last_inert_out = SIZE_MAX;  // where the last inert character starts in *out
  uint32_t last_inert = 0;
  for (size_t i = 0; i < n;) {
    size_t len;
    const uint32_t cp = next_cp(s, n, i, &len);
    const bool is_inert = len == 0 || inert(cp);
    if (is_inert && !pending.empty()) normalize(pending, out), pending.clear();
    if (len == 0) {  // invalid UTF-8: kept, and nothing composes across it
      out->push_back(static_cast<char>(s[i++]));
      last_inert_out = SIZE_MAX;
      continue;
    }
    if (is_inert) {
      last_inert_out = out->size(), last_inert = cp;
      out->append(text.substr(i, len));
    } else {
      if (pending.empty() && last_inert_out != SIZE_MAX) {
        out->resize(last_inert_out);  // the inert character joins the pending ones
        pending.push_back(last_inert);
      }
      last_inert_out = SIZE_MAX;
      pending.push_back(cp);
    }
    i += len;
  }
  if (!pending.empty()) normalize(pending, out);
}

}  // namespace meshloom::tokenizer
