// The prepare pipeline: documents in, a Megatron indexed dataset out.
//
// Three stages on their own threads:
//   reader   one thread: pulls documents from a DocumentReader in input order
//            and cuts them into numbered batches (up to 256 documents or 1 MiB)
//   workers  N threads: repair UTF-8 and tokenize whole batches
//   writer   the calling thread: appends batches strictly in batch order
// Batch boundaries depend only on the documents, and each document's tokens
// only on its text, so PREFIX.bin/.idx are byte-identical for any N. At most
// 2 N + 2 batches are in flight, which bounds memory however slow the writer
// (a document larger than a batch travels alone).
//
// After each document the tokenizer's end-of-text id is appended if it has one
// (eot_id() >= 0: byte 256, GPT-2 50256), so documents stay separable once
// packed into training sequences; the .idx length includes it. The dtype is the
// smallest that fits the vocabulary (uint16 up to 65536 ids, else int32).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/documents.hpp"
#include "data/indexed_dataset.hpp"
#include "tokenizer/tokenizer.hpp"

namespace meshloom::data {

struct PrepareProgress {
  uint64_t documents = 0;  // written so far
  uint64_t tokens = 0;
  uint64_t text_bytes = 0;   // text bytes tokenized
  uint64_t input_done = 0;   // input bytes behind the documents written so far
  uint64_t input_total = 0;  // input bytes in all
  double seconds = 0;
};

struct PrepareOptions {
  std::vector<std::string> inputs;
  ReaderOptions reader;
  std::string out_prefix;
  int threads = 0;  // tokenizing workers; 0: one per hardware thread
  // Called on the calling thread about every progress_interval_s, and once at
  // the end.
  std::function<void(const PrepareProgress&)> on_progress;
  double progress_interval_s = 0.5;
};

struct PrepareReport {
  InputReport input;         // documents, empty, invalid UTF-8, unreadable, problems
  uint64_t tokens = 0;       // written, end-of-text ids included
  uint64_t text_bytes = 0;   // text bytes tokenized (after UTF-8 repair)
  uint64_t input_bytes = 0;  // input bytes read (compressed where compressed)
  uint64_t bin_bytes = 0;
  TokenDtype dtype = TokenDtype::kUint16;
  bool eot_appended = false;
  int threads = 0;
  double seconds = 0;
};

// Runs the pipeline and writes out_prefix.bin/.idx. Throws Error for a bad
// input path, an unwritable output, or when no document at all was found (the
// partial output is removed); data problems are counted in the report instead.
PrepareReport prepare_dataset(const PrepareOptions& options, const tokenizer::Tokenizer& tokenizer);

}  // namespace meshloom::data
