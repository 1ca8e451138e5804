// The held-out evaluation set (eval.every): a fixed list of pieces of
// held-out documents (dataplane/holdout.hpp), the same at every evaluation
// of a run, whatever its loaders, layout or restarts, so that evaluations
// are comparable with each other.
//
// Source s gets about eval.tokens · w_s tokens (w: the mixture at step 0,
// normalized; eval.tokens 0: data.tokens_per_step): its held-out documents
// in document order, each cut into pieces of at most data.seq_len tokens as
// training cuts them (positions restart at 0 in every piece), the last piece
// shortened to the quota. The pieces go, in that order, into batches of at
// most data.tokens_per_step tokens, which the lead plans like steps.
// Pure: no MPI, no file.
#pragma once

#include <cstdint>
#include <vector>

#include "config/config.hpp"
#include "dataplane/holdout.hpp"
#include "dataplane/stream.hpp"

namespace meshloom::dataplane {

struct EvalSet {
  std::vector<std::vector<Piece>> batches;
  std::vector<int64_t> source_tokens;  // per source: tokens asked (quota) and taken
  std::vector<int64_t> source_quota;
  int64_t tokens() const;
};

// `length` is asked for held-out documents only, in document order. Throws
// Error (naming eval.holdout) when the split gives no token at all.
EvalSet build_eval_set(const config::Config& config, const std::vector<int64_t>& docs_per_source,
                       const LengthFn& length);

// Up to `count` held-out documents of a source of `docs` documents, from
// document `from` on, in order: what the lead asks the lengths of at once.
std::vector<int64_t> held_out_docs(const Holdout& holdout, int64_t from, int64_t docs,
                                   size_t count);

// The first positions of the loss-by-position buckets: eval.positions, or 0
// and the powers of two below data.seq_len.
std::vector<int64_t> position_edges(const config::Config& config);

}  // namespace meshloom::dataplane
