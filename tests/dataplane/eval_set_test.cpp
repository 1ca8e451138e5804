// The held-out evaluation set (dataplane/eval_set.hpp): only held-out
// documents, cut as training cuts them, each source's share of the tokens,
// batches within the step budget, the same set every time.
#include "dataplane/eval_set.hpp"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "base/check.hpp"

using namespace meshloom;
using namespace meshloom::dataplane;

namespace {

config::Config two_sources(double holdout) {
  config::Config c;
  c.data.seq_len = 64;
  c.data.tokens_per_step = 256;
  c.data.sources.resize(2);
  c.data.sources[0].name = "books";
  c.data.sources[0].weight = 3;
  c.data.sources[1].name = "code";
  c.data.sources[1].weight = 1;
  c.eval.holdout = holdout;
  c.eval.every = 5;
  c.eval.tokens = 1000;
  return c;
}

// Document d of source s has 10 + (7 d + 13 s) mod 150 tokens.
int64_t doc_length(int s, int64_t d) { return 10 + (7 * d + 13 * s) % 150; }

}  // namespace

TEST(EvalSet, HeldOutDocumentsOnlyEachSourceItsShareBatchesWithinTheBudget) {
  const config::Config c = two_sources(0.2);
  std::set<std::pair<int, int64_t>> asked;
  const LengthFn length = [&](int s, int64_t d) {
    asked.insert({s, d});
    return doc_length(s, d);
  };
  const EvalSet set = build_eval_set(c, {500, 500}, length);
  EXPECT_EQ(set.source_quota, (std::vector<int64_t>{750, 250}));
  EXPECT_EQ(set.source_tokens, set.source_quota) << "enough held-out documents for both";
  std::map<int, int64_t> tokens;
  std::map<std::pair<int, int64_t>, int64_t> next_offset;
  for (const auto& batch : set.batches) {
    int64_t in_batch = 0;
    for (const Piece& p : batch) {
      const Holdout h(c.data.sources[size_t(p.source)].name, 0.2);
      ASSERT_TRUE(h(p.doc)) << "document " << p.doc << " is not held out";
      ASSERT_LE(p.length, c.data.seq_len);
      // Pieces follow each other within a document, from offset 0.
      int64_t& next = next_offset[std::make_pair(int(p.source), p.doc)];
      ASSERT_EQ(p.offset, next);
      next = p.offset + p.length;
      ASSERT_LE(p.offset + p.length, doc_length(p.source, p.doc));
      tokens[p.source] += p.length;
      in_batch += p.length;
    }
    EXPECT_LE(in_batch, c.data.tokens_per_step);
  }
  EXPECT_EQ(tokens[0], 750);
  EXPECT_EQ(tokens[1], 250);
  for (const auto& [s, d] : asked) {
    const Holdout h(c.data.sources[size_t(s)].name, 0.2);
    EXPECT_TRUE(h(d)) << "the length of a training document was asked";
  }
  // The same set again: evaluations are comparable.
  const EvalSet again = build_eval_set(c, {500, 500}, length);
  ASSERT_EQ(again.batches.size(), set.batches.size());
  for (size_t b = 0; b < set.batches.size(); ++b)
    for (size_t i = 0; i < set.batches[b].size(); ++i) {
      EXPECT_EQ(again.batches[b][i].doc, set.batches[b][i].doc);
      EXPECT_EQ(again.batches[b][i].length, set.batches[b][i].length);
    }
}

TEST(EvalSet, ASmallSplitGivesWhatItHoldsAndAnEmptyOneIsRefused) {
  config::Config c = two_sources(0.2);
  const EvalSet small = build_eval_set(c, {6, 6}, doc_length);
  int64_t held = 0;
  for (int s = 0; s < 2; ++s)
    for (int64_t d = 0; d < 6; ++d)
      if (Holdout(c.data.sources[size_t(s)].name, 0.2)(d)) held += doc_length(s, d);
  EXPECT_LE(small.tokens(), held);
  c.eval.holdout = 1e-9;
  try {
    build_eval_set(c, {5, 5}, doc_length);
    FAIL() << "an empty held-out split was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("eval.holdout"), std::string::npos) << e.what();
  }
}

TEST(EvalSet, PositionBucketsArePowersOfTwoOrTheGivenList) {
  config::Config c = two_sources(0.1);
  EXPECT_EQ(position_edges(c), (std::vector<int64_t>{0, 1, 2, 4, 8, 16, 32}));
  c.eval.positions = {0, 10, 40};
  EXPECT_EQ(position_edges(c), (std::vector<int64_t>{0, 10, 40}));
}
