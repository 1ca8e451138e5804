// A source's documents as token sequences, as a loader serves them.
//
// Indexed sources (PREFIX.bin/.idx) are memory-mapped: lengths and tokens are
// free. Raw sources (jsonl, text, tar) are tokenized on demand; their token
// lists are cached (bounded), so the length asked by the planner and the
// tokens fetched a moment later by a constructor cost one tokenization.
// Image-text sources (webdataset, image_source.hpp) deliver a sample as its
// image positions (token model::kImagePosition, -1, with a patch each) and
// then its caption's tokens. prepare() tokenizes (and decodes) a list of
// documents on the loader's worker threads. Every method is safe to call from
// several threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.hpp"
#include "tokenizer/tokenizer.hpp"

namespace meshloom::sources {

class DocSource {
 public:
  virtual ~DocSource() = default;
  virtual int64_t docs() const = 0;
  virtual int64_t length(int64_t doc) = 0;
  // Tokens [offset, offset + n) of `doc` appended to *out.
  virtual void read(int64_t doc, int64_t offset, int64_t n, std::vector<int32_t>* out) = 0;
  // The document's leading image positions (0 for text sources): they
  // predict nothing.
  virtual int64_t image_positions(int64_t doc) {
    (void)doc;
    return 0;
  }
  // The patches of the image positions among [offset, offset + n) of `doc`,
  // patch_dim() floats each, appended to *out.
  virtual void read_patches(int64_t doc, int64_t offset, int64_t n, std::vector<float>* out) {
    (void)doc, (void)offset, (void)n, (void)out;
  }
  // Makes `docs` ready (tokenized, decoded) using up to `threads` threads.
  virtual void prepare(const std::vector<int64_t>& docs, int threads) { (void)docs, (void)threads; }
  // Makes the lengths of `docs` known (what a length request needs), using
  // up to `threads` threads. Returns true when prepare() still has work to do
  // on them: image sources know a sample's patches from the image header and
  // only tokenize the caption here; decoding waits for prepare(), which the
  // loader runs when idle, so a length reply never waits on decoding.
  virtual bool prepare_lengths(const std::vector<int64_t>& docs, int threads) {
    prepare(docs, threads);
    return false;
  }
  // Seconds of preparation per token so far (0 for indexed sources): the
  // loader auto-partitioning weighs sources by it.
  virtual double seconds_per_token() const { return 0.0; }
  // Image sources: what decoding has cost so far. A sample decoded more than
  // once left the decoded cache (data.image.cache_mib) before it was read;
  // one decoded at read was asked for before the loader had prepared it.
  struct DecodeStats {
    int64_t decodes = 0;  // samples decoded (their images) and resized, counting repeats
    int64_t docs = 0;     // distinct samples decoded
    int64_t at_read = 0;  // decodes when a constructor asked for patches (not ready yet)
    double seconds = 0;   // spent decoding (summed over threads)
  };
  virtual DecodeStats decode_stats() const { return {}; }
};

// Opens data.sources[index]; throws meshloom::Error naming the source and
// file. Raw sources cache data.cache_tokens tokens; an indexed source's read()
// throws Error naming the source, file and document for an id outside
// [0, model.vocab_size) (raw sources' tokenizers are checked by check_sources).
std::unique_ptr<DocSource> open_doc_source(const config::Config& config, size_t index);

// A raw document's tokens as `meshloom prepare` makes them: its text's ids,
// then the tokenizer's end-of-text id (if it has one).
std::vector<int32_t> encode_document(const tokenizer::Tokenizer& tokenizer, std::string_view text);

// Validates every source and throws the first problem: indexed ones are
// opened (their indexes and first documents' ids checked, documents not all
// empty); raw ones are read once (no document: an error saying why; lines
// skipped or UTF-8 repaired: a warning) and their tokenizer's ids must fit
// model.vocab_size. Run by rank 0 before the roles start, so a bad path is
// one clear message.
void check_sources(const config::Config& config);

}  // namespace meshloom::sources
