// Pre-tokenizers: the split of text into pieces before BPE, written by hand.
//
// Each function returns the end of the piece that starts at `pos`, exactly as
// the reference regex (leftmost-first alternation, greedy, with backtracking)
// would match it there:
//   GPT-2  's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   cl100k (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//          ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   o200k  [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:C)?|
//          [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:C)?|
//          \p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
//          (C being the contractions 's|'t|'re|'ve|'m|'ll|'d)
//   qwen2  cl100k with \p{N} for \p{N}{1,3}: one piece per digit (Qwen2, Qwen3)
// Llama 3's tokenizer.json uses the cl100k pattern.
// std::regex has neither \p{..} nor the needed semantics, and a hand-written
// scanner with an ASCII fast path is several times faster than a regex engine.
// Invalid UTF-8 bytes count as punctuation (see unicode_class.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace meshloom::tokenizer {

enum class SplitPattern { kGpt2, kCl100k, kO200k, kQwen2 };

size_t next_piece_gpt2(const uint8_t* s, size_t n, size_t pos);
size_t next_piece_cl100k(const uint8_t* s, size_t n, size_t pos);
size_t next_piece_o200k(const uint8_t* s, size_t n, size_t pos);
size_t next_piece_qwen2(const uint8_t* s, size_t n, size_t pos);

// The pattern whose regex is exactly `regex` (as tiktoken's pat_str or a
// tokenizer.json Split spells it); false when it is none of the above.
bool split_pattern_of_regex(std::string_view regex, SplitPattern* pattern);

// The pieces of `text` (views into it), for tests and debugging.
std::vector<std::string_view> split_pieces(SplitPattern pattern, std::string_view text);

}  // namespace meshloom::tokenizer
