// UTF-8 repair for text read from the outside world.
//
// Tokenizers expect valid UTF-8, and real corpora contain Latin-1 files,
// truncated multi-byte characters and binary junk. sanitize_utf8() replaces
// each invalid sequence with U+FFFD (EF BF BD) and returns how many it
// replaced, so callers can count and report them instead of dropping text.
// "One sequence" follows Unicode's "maximal subpart" practice (Unicode 15,
// section 3.9, U+FFFD substitution), the same rule as Python's
// bytes.decode("utf-8", "replace"): a truncated but well-begun character is one
// replacement, every other bad byte is one replacement each. Surrogates
// (ED A0..BF) and overlong forms (C0, C1, E0 80..9F, F0 80..8F) are invalid.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace meshloom {

// Length of the longest valid UTF-8 prefix of text (text.size() if all valid).
size_t valid_utf8_prefix(std::string_view text);

// Replaces invalid sequences in *text with U+FFFD; returns the number replaced
// (0 means *text was valid and is unchanged, with no copy made).
size_t sanitize_utf8(std::string* text);

}  // namespace meshloom
