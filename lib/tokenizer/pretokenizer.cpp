// The hand-written pre-tokenizers of pretokenizer.hpp. Each branch names the
// alternative of the pattern it implements; the order of the branches is the
// order of the alternatives, which decides ties as the regex would.
#include "tokenizer/pretokenizer.hpp"

#include "tokenizer/unicode_class.hpp"

namespace meshloom::tokenizer {
namespace {

// The patterns as tiktoken's pat_str and tokenizer.json spell them.
constexpr std::string_view kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kCl100kRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kO200kRegex =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

using unicode::CodePoint;
using unicode::kLetter;
using unicode::kLowerish;
using unicode::kNewline;
using unicode::kNumber;
using unicode::kSpace;
using unicode::kUpperish;

inline CodePoint at(const uint8_t* s, size_t n, size_t i) { return unicode::decode(s + i, n - i); }

// End of the run from `i` of code points having any bit of `bits`.
inline size_t run_any(const uint8_t* s, size_t n, size_t i, uint8_t bits) {
  while (i < n) {
    const CodePoint c = at(s, n, i);
    if (!(c.cls & bits)) break;
    i += c.len;
  }
  return i;
}

// End of the run from `i` of code points having none of `bits`.
inline size_t run_none(const uint8_t* s, size_t n, size_t i, uint8_t bits) {
  while (i < n) {
    const CodePoint c = at(s, n, i);
    if (c.cls & bits) break;
    i += c.len;
  }
  return i;
}

// \p{N}{1,MaxDigits} from `i` (s[i] is a number).
template <int MaxDigits>
inline size_t up_to_numbers(const uint8_t* s, size_t n, size_t i) {
  for (int k = 0; k < MaxDigits && i < n; ++k) {
    const CodePoint c = at(s, n, i);
    if (!(c.cls & kNumber)) break;
    i += c.len;
  }
  return i;
}

inline uint8_t ascii_lower(uint8_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

// Length of 's|'t|'re|'ve|'m|'ll|'d at s[i] == '\'' (0: none). Case-insensitive
// matching follows Unicode simple case folding, under which U+017F (long s)
// also matches 's'.
size_t contraction(const uint8_t* s, size_t n, size_t i, bool ignore_case) {
  if (i + 1 >= n) return 0;
  uint8_t a = s[i + 1];
  if (ignore_case) {
    if (a == 0xC5 && i + 2 < n && s[i + 2] == 0xBF) return 3;  // U+017F
    a = ascii_lower(a);
  }
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (a != 'r' && a != 'v' && a != 'l') return 0;
  if (i + 2 >= n) return 0;
  const uint8_t b = ignore_case ? ascii_lower(s[i + 2]) : s[i + 2];
  return (b == 'e' && a != 'l') || (b == 'l' && a == 'l') ? 3 : 0;
}

// \s+(?!\S)|\s+ from `i` (s[i] is whitespace): the whole run at the end of the
// text; otherwise the run less its last code point, which may then start the
// next piece (" word"); a single code point when the run has only one.
size_t space_run(const uint8_t* s, size_t n, size_t i) {
  const size_t start = i;
  size_t last = i;
  while (i < n) {
    const CodePoint c = at(s, n, i);
    if (!(c.cls & kSpace)) break;
    last = i;
    i += c.len;
  }
  if (i == n || last == start) return i;
  return last;
}

// \s*[\r\n]+|\s+(?!\S)|\s+ from `i` (s[i] is whitespace). The first matches up
// to and including the last \r or \n of the whitespace run, when it has one.
size_t space_run_newline(const uint8_t* s, size_t n, size_t i) {
  size_t j = i, after_newline = 0;
  while (j < n) {
    const CodePoint c = at(s, n, j);
    if (!(c.cls & kSpace)) break;
    j += c.len;
    if (c.cls & kNewline) after_newline = j;
  }
  if (after_newline) return after_newline;
  return space_run(s, n, i);
}

// o200k [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+ from `j`;
// 0 when it does not match. The greedy first part gives back code points until
// the second can match: at the end of the run, or at its last "lowerish" one.
size_t o200k_lower_tail(const uint8_t* s, size_t n, size_t j) {
  size_t i = j, last_lower_end = 0;
  while (i < n) {
    const CodePoint c = at(s, n, i);
    if (!(c.cls & kUpperish)) break;
    i += c.len;
    if (c.cls & kLowerish) last_lower_end = i;
  }
  if (i < n && (at(s, n, i).cls & kLowerish)) return run_any(s, n, i, kLowerish);
  return last_lower_end;
}

// o200k [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]* from `j`; 0: no match.
size_t o200k_upper_head(const uint8_t* s, size_t n, size_t j) {
  if (!(at(s, n, j).cls & kUpperish)) return 0;
  return run_any(s, n, run_any(s, n, j, kUpperish), kLowerish);
}

}  // namespace

size_t next_piece_gpt2(const uint8_t* s, size_t n, size_t pos) {
  const uint8_t b = s[pos];
  if (b == '\'') {  // 's|'t|'re|'ve|'m|'ll|'d
    if (const size_t k = contraction(s, n, pos, false)) return pos + k;
  }
  // ' ?' before a letter, number or punctuation run.
  size_t start = pos;
  CodePoint c = at(s, n, pos);
  if (b == ' ' && pos + 1 < n) {
    const CodePoint d = at(s, n, pos + 1);
    if (!(d.cls & kSpace)) start = pos + 1, c = d;
  }
  if (c.cls & kLetter) return run_any(s, n, start, kLetter);  //  ?\p{L}+
  if (c.cls & kNumber) return run_any(s, n, start, kNumber);  //  ?\p{N}+
  if (!(c.cls & kSpace))
    return run_none(s, n, start, kSpace | kLetter | kNumber);  //  ?[^\s\p{L}\p{N}]+
  return space_run(s, n, pos);
}

namespace {

// cl100k (MaxDigits 3) and qwen2 (MaxDigits 1): they differ in \p{N}{1,3}.
template <int MaxDigits>
size_t next_piece_cl100k_like(const uint8_t* s, size_t n, size_t pos) {
  const uint8_t b = s[pos];
  if (b == '\'') {  // (?i:'s|'t|'re|'ve|'m|'ll|'d)
    if (const size_t k = contraction(s, n, pos, true)) return pos + k;
  }
  const CodePoint c = at(s, n, pos);
  const size_t next = pos + c.len;
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (c.cls & kLetter) return run_any(s, n, pos, kLetter);
  if (!(c.cls & (kNumber | kNewline)) && next < n && (at(s, n, next).cls & kLetter))
    return run_any(s, n, next, kLetter);
  if (c.cls & kNumber) return up_to_numbers<MaxDigits>(s, n, pos);  // \p{N}{1,3} or \p{N}
  //  ?[^\s\p{L}\p{N}]+[\r\n]*
  constexpr uint8_t kWord = kSpace | kLetter | kNumber;
  size_t start = c.cls & kWord ? n : pos;
  if (b == ' ' && next < n && !(at(s, n, next).cls & kWord)) start = next;
  if (start < n) {
    size_t i = run_none(s, n, start, kWord);
    while (i < n && (s[i] == '\r' || s[i] == '\n')) ++i;
    return i;
  }
  return space_run_newline(s, n, pos);
}

}  // namespace

size_t next_piece_cl100k(const uint8_t* s, size_t n, size_t pos) {
  return next_piece_cl100k_like<3>(s, n, pos);
}

size_t next_piece_qwen2(const uint8_t* s, size_t n, size_t pos) {
  return next_piece_cl100k_like<1>(s, n, pos);
}

size_t next_piece_o200k(const uint8_t* s, size_t n, size_t pos) {
  const uint8_t b = s[pos];
  const CodePoint c = at(s, n, pos);
  const size_t next = pos + c.len;
  // The two letter alternatives, each first with the optional
  // [^\r\n\p{L}\p{N}] prefix, then without it, then the contraction suffix.
  const bool prefix = !(c.cls & (kLetter | kNumber | kNewline)) && next < n;
  size_t end = 0;
  if (prefix) end = o200k_lower_tail(s, n, next);
  if (!end) end = o200k_lower_tail(s, n, pos);
  if (!end && prefix) end = o200k_upper_head(s, n, next);
  if (!end) end = o200k_upper_head(s, n, pos);
  if (end) {
    if (end < n && s[end] == '\'') end += contraction(s, n, end, true);
    return end;
  }
  if (c.cls & kNumber) return up_to_numbers<3>(s, n, pos);  // \p{N}{1,3}
  //  ?[^\s\p{L}\p{N}]+[\r\n/]*
  constexpr uint8_t kWord = kSpace | kLetter | kNumber;
  size_t start = c.cls & kWord ? n : pos;
  if (b == ' ' && next < n && !(at(s, n, next).cls & kWord)) start = next;
  if (start < n) {
    size_t i = run_none(s, n, start, kWord);
    while (i < n && (s[i] == '\r' || s[i] == '\n' || s[i] == '/')) ++i;
    return i;
  }
  return space_run_newline(s, n, pos);
}

bool split_pattern_of_regex(std::string_view regex, SplitPattern* pattern) {
  if (regex == kGpt2Regex)
    *pattern = SplitPattern::kGpt2;
  else if (regex == kCl100kRegex)
    *pattern = SplitPattern::kCl100k;
  else if (regex == kQwen2Regex)
    *pattern = SplitPattern::kQwen2;
  else if (regex == kO200kRegex)
    *pattern = SplitPattern::kO200k;
  else
    return false;
  return true;
}

std::vector<std::string_view> split_pieces(SplitPattern pattern, std::string_view text) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  std::vector<std::string_view> pieces;
  for (size_t pos = 0; pos < n;) {
    size_t end = pattern == SplitPattern::kGpt2     ? next_piece_gpt2(s, n, pos)
                 : pattern == SplitPattern::kCl100k ? next_piece_cl100k(s, n, pos)
                 : pattern == SplitPattern::kQwen2  ? next_piece_qwen2(s, n, pos)
                                                    : next_piece_o200k(s, n, pos);
    pieces.push_back(text.substr(pos, end - pos));
    pos = end;
  }
  return pieces;
}

}  // namespace meshloom::tokenizer
