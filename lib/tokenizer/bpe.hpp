// Byte-level BPE (GPT-2 and tiktoken vocabularies) behind the Tokenizer API.
//
// A BpeModel is an immutable vocabulary: token bytes by id and a flat hash
// table from token bytes to id. The rank of merging two adjacent parts is
//   GPT-2 (vocab.bpe)  the line number of the pair in the merges list, found in
//                      a flat hash table keyed by the pair of ids;
//   tiktoken           the rank (= id) of their concatenation when that is a
//                      token (tiktoken's rule; no pair table, so loading
//                      o200k takes ~50 ms instead of ~500 ms).
// Encoding: split the text into pieces (pretokenizer.hpp); a piece that is a
// whole token is one lookup; otherwise repeatedly merge the adjacent pair of
// lowest rank, leftmost on ties. For GPT-2 that equals the original "merge
// every occurrence of the best pair", because a merge's rank is always below
// the ranks of the merges that use its result.
// Merged pieces are memoized in a per-thread cache, so encode() needs no lock.
//
// The literal text of a special token ("<|endoftext|>") is ordinary text for
// encode() (ids equal tiktoken's encode_ordinary and gpt-3-encoder's encode):
// a document cannot forge a document boundary. encode_with_special() maps the
// allowed special tokens to their ids.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/pretokenizer.hpp"
#include "tokenizer/tokenizer.hpp"

namespace meshloom::tokenizer {

class BpeModel;

// What a vocabulary loader produces; build_bpe_model() checks and indexes it.
struct BpeVocab {
  std::string name;    // "gpt2", "cl100k_base", ...
  std::string source;  // file(s) it came from, for error messages
  SplitPattern pattern = SplitPattern::kGpt2;
  std::vector<std::string> tokens;  // bytes by id; "" marks an unused id
  // GPT-2: merges as (left bytes, right bytes) in rank order. Empty: tiktoken rule.
  std::vector<std::pair<std::string, std::string>> merges;
  std::vector<std::pair<std::string, int32_t>> specials;  // text, id
  int32_t vocab_size = 0;                                 // 0: max id + 1
  // A piece that is a whole token encodes as that token without merging (true
  // for GPT-2 and tiktoken, whose merges always rebuild their tokens, and for
  // tokenizer.json's "ignore_merges"); false: always merge (Qwen3).
  bool whole_tokens = true;
};

// Builds the indexed model; throws meshloom::Error naming vocab.source when the
// vocabulary is inconsistent (a byte without a token, a merge of unknown tokens).
std::shared_ptr<const BpeModel> build_bpe_model(BpeVocab vocab);

class BpeTokenizer final : public Tokenizer {
 public:
  explicit BpeTokenizer(std::shared_ptr<const BpeModel> model);
  ~BpeTokenizer() override;

  std::vector<int32_t> encode(std::string_view text) const override;
  std::vector<int32_t> encode_with_special(
      std::string_view text, const std::vector<std::string>& allowed_special) const override;
  std::string decode(const int32_t* ids, size_t n) const override;
  using Tokenizer::decode;
  int32_t vocab_size() const override;
  int32_t eot_id() const override;
  std::string name() const override;

  // Appends the ids of `text` (special tokens as plain text) to *out.
  void encode_append(std::string_view text, std::vector<int32_t>* out) const;
  // The bytes of token `id` ("" for an unused id); throws for ids out of range.
  std::string_view token_bytes(int32_t id) const;
  // The id of a special token's text, or -1.
  int32_t special_id(std::string_view text) const;
  // BPE of one piece without the whole-token shortcut or the cache (tests).
  std::vector<int32_t> merge_piece_uncached(std::string_view piece) const;

 private:
  std::shared_ptr<const BpeModel> model_;
};

}  // namespace meshloom::tokenizer
