#include "dataplane/eval_set.hpp"

#include <algorithm>
#include <cmath>

#include "base/check.hpp"
#include "base/strings.hpp"
#include "dataplane/schedule.hpp"

namespace meshloom::dataplane {

int64_t EvalSet::tokens() const {
  int64_t n = 0;
  for (int64_t t : source_tokens) n += t;
  return n;
}

std::vector<int64_t> held_out_docs(const Holdout& holdout, int64_t from, int64_t docs,
                                   size_t count) {
  std::vector<int64_t> out;
  for (int64_t d = from; d < docs && out.size() < count; ++d)
    if (holdout(d)) out.push_back(d);
  return out;
}

namespace {

// Source `s`'s pieces, up to `quota` tokens.
std::vector<Piece> source_pieces(const config::Config& config, int s, int64_t docs, int64_t quota,
                                 const LengthFn& length) {
  const Holdout holdout = holdout_of(config, size_t(s));
  const int64_t seq_len = config.data.seq_len;
  std::vector<Piece> pieces;
  int64_t taken = 0;
  for (int64_t doc = 0; doc < docs && taken < quota; ++doc) {
    if (!holdout(doc)) continue;
    const int64_t n = length(s, doc);
    for (int64_t offset = 0; offset < n && taken < quota; offset += seq_len) {
      Piece p;
      p.source = int32_t(s);
      p.doc = doc;
      p.offset = offset;
      p.length = std::min({seq_len, n - offset, quota - taken});
      taken += p.length;
      pieces.push_back(p);
    }
  }
  return pieces;
}

}  // namespace

EvalSet build_eval_set(const config::Config& config, const std::vector<int64_t>& docs_per_source,
                       const LengthFn& length) {
  const size_t n = config.data.sources.size();
  ML_CHECK(docs_per_source.size() == n, "one document count per source");
  const int64_t budget = config.data.tokens_per_step;
  const int64_t total = config.eval.tokens > 0 ? config.eval.tokens : budget;
  // Evaluation-only sources (eval.sources) in equal shares, else every
  // source's held-out part by the mixture at step 0.
  std::vector<double> weights = MixtureSchedule(config.data).weights(0);
  if (!config.eval.sources.empty())
    for (size_t s = 0; s < n; ++s)
      weights[s] = evaluation_only(config, s) ? 1.0 / double(config.eval.sources.size()) : 0.0;
  EvalSet set;
  set.source_tokens.assign(n, 0);
  set.source_quota.assign(n, 0);
  std::vector<Piece> all;
  for (size_t s = 0; s < n; ++s) {
    set.source_quota[s] = std::llround(double(total) * weights[s]);
    for (const Piece& p :
         source_pieces(config, int(s), docs_per_source[s], set.source_quota[s], length)) {
      set.source_tokens[s] += p.length;
      all.push_back(p);
    }
  }
  if (set.tokens() == 0)
    throw Error(
        strf("eval: the held-out split holds no token (eval.holdout %g of %zu source(s)%s): "
             "raise eval.holdout",
             config.eval.holdout, n,
             config.eval.sources.empty() ? "" : ", and the eval.sources are empty"));
  int64_t in_batch = 0;
  for (const Piece& p : all) {
    if (set.batches.empty() || in_batch + p.length > budget) {
      set.batches.emplace_back();
      in_batch = 0;
    }
    set.batches.back().push_back(p);
    in_batch += p.length;
  }
  return set;
}

std::vector<int64_t> position_edges(const config::Config& config) {
  if (!config.eval.positions.empty()) return config.eval.positions;
  std::vector<int64_t> edges{0};
  for (int64_t p = 1; p < config.data.seq_len; p *= 2) edges.push_back(p);
  return edges;
}

}  // namespace meshloom::dataplane
