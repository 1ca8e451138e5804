// Unicode NFC (canonical composition), the "NFC" normalizer of a Hugging Face
// tokenizer.json (Qwen2, Qwen3).
//
// The tables (nfc_tables.inc, made by scripts/dev/gen_nfc_tables.py from the
// Unicode data files of Debian's unicode-data) hold only the characters that
// Unicode 9.0 had assigned, because tokenizers' NFC (the Rust crate
// unicode-normalization-alignments) has Unicode 9.0 tables: a mark added later
// is left where it is, as tokenizers leaves it, where a current NFC (ICU,
// JavaScript's normalize) would reorder it.
//
// Text whose bytes are all below 0xCC (code points below U+0300, which NFC
// never changes) is copied as it is. Otherwise only the stretches around
// characters that may change or combine are normalized. Invalid UTF-8 bytes
// are kept as they are, and nothing composes across them.
#pragma once

#include <string>
#include <string_view>

namespace meshloom::tokenizer {

// True when nfc() may change `text` (it has a byte >= 0xCC).
bool nfc_may_change(std::string_view text);

// The NFC form of `text` in *out (replaced).
void nfc(std::string_view text, std::string* out);

}  // namespace meshloom::tokenizer
