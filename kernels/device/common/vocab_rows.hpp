// A block of the vocabulary: what a tensor-parallel rank holds of the
// embedding and the LM head (model::TpShard::vocab_begin / vocab_rows), the
// whole vocabulary at tp = 1. Host and device code.
#pragma once

#include <cstdint>

namespace meshloom::cuda {

// Vocabulary rows [first, first + rows).
struct VocabRows {
  int64_t first = 0;
  int64_t rows = 0;
};

}  // namespace meshloom::cuda
