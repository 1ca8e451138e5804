// What `meshloom prepare` and `meshloom inspect` print: the progress line,
// the report of a prepared dataset and the summary of one (pure formatting).
#pragma once

#include <string>

#include "data/indexed_dataset.hpp"
#include "data/prepare.hpp"

namespace meshloom::data {

// "  317 docs, 6.3 / 6.3 MB, 55.0 MB/s, 6,329,321 tokens, ETA 2 s" (no newline).
std::string prepare_progress_line(const PrepareProgress& p);

// The report after prepare_dataset() wrote PREFIX.bin/.idx, lines ending in
// newlines. `eot_id`: the tokenizer's end-of-text id, named when appended.
std::string prepare_report(const PrepareReport& r, const std::string& prefix,
                           const std::string& tokenizer_name, int eot_id);

// Counts and the sequence length distribution of a dataset, two lines.
std::string dataset_summary(const IndexedDataset& ds, const std::string& prefix);

}  // namespace meshloom::data
