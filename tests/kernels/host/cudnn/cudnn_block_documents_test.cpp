// The planning of cuDNN passes for a query block against a key block
// (sdpa_block_documents.hpp), against the per-token mask itself: for zigzag
// ring steps, Ulysses' gathered tokens and hand-made layouts, the passes'
// documents (top-left causal or full) must cover every (query, key) pair the
// mask allows exactly once and no other, with disjoint query rows and key
// rows inside a pass. Host only: runs in CI.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "kernels/host/cudnn/sdpa_block_documents.hpp"
#include "kernels/host/cudnn/sdpa_documents.hpp"

namespace meshloom::cudnn {
namespace {

struct Tokens {
  std::vector<int32_t> sample, pos;
  void add(int32_t s, int32_t p) {
    sample.push_back(s);
    pos.push_back(p);
  }
  void append(const Tokens& o) {
    sample.insert(sample.end(), o.sample.begin(), o.sample.end());
    pos.insert(pos.end(), o.pos.begin(), o.pos.end());
  }
  size_t size() const { return sample.size(); }
};

// How often each (q, k) pair is covered by the passes' documents.
std::vector<int> coverage(const std::vector<SdpaPass>& passes, size_t nq, size_t nk) {
  std::vector<int> times(nq * nk, 0);
  for (const SdpaPass& p : passes)
    for (const DocumentPair& d : p.docs)
      for (int32_t i = 0; i < d.q_len; ++i)
        for (int32_t j = 0; j < d.kv_len; ++j)
          if (!p.causal || j <= i) ++times[size_t(d.q_start + i) * nk + size_t(d.kv_start + j)];
  return times;
}

void expect_exact(const Tokens& q, const Tokens& k, const std::vector<SdpaPass>& passes,
                  const std::string& what) {
  const std::vector<int> times = coverage(passes, q.size(), k.size());
  for (size_t i = 0; i < q.size(); ++i)
    for (size_t j = 0; j < k.size(); ++j) {
      const bool allowed = q.sample[i] == k.sample[j] && k.pos[j] <= q.pos[i];
      ASSERT_EQ(times[i * k.size() + j], allowed ? 1 : 0)
          << what << ": query " << i << " (sample " << q.sample[i] << ", pos " << q.pos[i]
          << ") key " << j << " (sample " << k.sample[j] << ", pos " << k.pos[j] << ")";
    }
  for (const SdpaPass& p : passes)
    for (size_t a = 0; a < p.docs.size(); ++a) {
      const DocumentPair& x = p.docs[a];
      EXPECT_GT(x.q_len, 0) << what;
      EXPECT_GT(x.kv_len, 0) << what;
      for (size_t b = a + 1; b < p.docs.size(); ++b) {
        const DocumentPair& y = p.docs[b];
        EXPECT_TRUE(x.q_start + x.q_len <= y.q_start || y.q_start + y.q_len <= x.q_start)
            << what << ": query rows shared inside a pass";
        EXPECT_TRUE(x.kv_start + x.kv_len <= y.kv_start || y.kv_start + y.kv_len <= x.kv_start)
            << what << ": key rows shared inside a pass";
      }
    }
}

std::vector<SdpaPass> plan(const Tokens& q, const Tokens& k) {
  std::string why;
  auto passes = block_documents(q.sample, q.pos, k.sample, k.pos, &why);
  EXPECT_TRUE(passes.has_value()) << why;
  return passes.value_or(std::vector<SdpaPass>{});
}

// A packed micro-batch of documents with these lengths, positions from 0.
Tokens packed(const std::vector<int>& lengths) {
  Tokens t;
  for (size_t s = 0; s < lengths.size(); ++s)
    for (int p = 0; p < lengths[s]; ++p) t.add(int32_t(s), p);
  return t;
}

// Member r's zigzag share of `all` over k members: chunks r and 2k-1-r of
// 2k equal chunks.
Tokens zigzag_share(const Tokens& all, int k, int r) {
  const size_t chunk = all.size() / size_t(2 * k);
  Tokens t;
  for (size_t c : {size_t(r), size_t(2 * k - 1 - r)})
    for (size_t i = c * chunk; i < (c + 1) * chunk; ++i) t.add(all.sample[i], all.pos[i]);
  return t;
}

TEST(CudnnBlockDocuments, PackedMicroBatchIsOneCausalPassOfItsDocuments) {
  const Tokens t = packed({5, 1, 7, 3});
  const std::vector<SdpaPass> passes = plan(t, t);
  ASSERT_EQ(passes.size(), 1u);
  EXPECT_TRUE(passes[0].causal);
  const std::optional<PackedDocuments> docs = packed_documents(t.sample, t.pos, nullptr);
  ASSERT_TRUE(docs);
  ASSERT_EQ(int64_t(passes[0].docs.size()), docs->count());
  for (size_t b = 0; b < passes[0].docs.size(); ++b) {
    const int32_t start = docs->starts[b], len = docs->starts[b + 1] - start;
    EXPECT_EQ(passes[0].docs[b], (DocumentPair{start, len, start, len}));
  }
  EXPECT_EQ(passes[0].max_len(), 7);
  expect_exact(t, t, passes, "packed");
}

TEST(CudnnBlockDocuments, EarlierChunkIsOneFullDocument) {
  // One sample of 16 over 2 members: chunk 0 (positions 0-3) fully visible
  // to chunk 3 (12-15).
  Tokens q, k;
  for (int p = 12; p < 16; ++p) q.add(0, p);
  for (int p = 0; p < 4; ++p) k.add(0, p);
  const std::vector<SdpaPass> passes = plan(q, k);
  ASSERT_EQ(passes.size(), 1u);
  EXPECT_FALSE(passes[0].causal);
  EXPECT_EQ(passes[0].docs, (std::vector<DocumentPair>{{0, 4, 0, 4}}));
  expect_exact(q, k, passes, "earlier chunk");
}

TEST(CudnnBlockDocuments, AdjacentFullyVisibleKeyChunksAreOneDocument) {
  // One sample of 16 over 2 members: member 0 holds chunks 0 and 3, member 1
  // chunks 1 and 2, which chunk 3 sees whole and which follow each other in
  // member 1's block: one full document of 8 keys, one pass.
  const Tokens all = packed({16});
  const Tokens q = zigzag_share(all, 2, 0), k = zigzag_share(all, 2, 1);
  const std::vector<SdpaPass> passes = plan(q, k);
  ASSERT_EQ(passes.size(), 1u);
  EXPECT_FALSE(passes[0].causal);
  EXPECT_EQ(passes[0].docs, (std::vector<DocumentPair>{{4, 4, 0, 8}}));
  expect_exact(q, k, passes, "adjacent chunks");
}

TEST(CudnnBlockDocuments, LaterChunkIsNothing) {
  Tokens q, k;
  for (int p = 0; p < 4; ++p) q.add(0, p);
  for (int p = 12; p < 16; ++p) k.add(0, p);
  EXPECT_TRUE(plan(q, k).empty());
}

TEST(CudnnBlockDocuments, OverlappingRunsSplitIntoFullAndCausal) {
  // Queries at 4-9 against keys at 2-11 of one sample: keys 2-3 full, then
  // 4-9 causal from the same position; keys 10-11 never seen.
  Tokens q, k;
  for (int p = 4; p < 10; ++p) q.add(0, p);
  for (int p = 2; p < 12; ++p) k.add(0, p);
  const std::vector<SdpaPass> passes = plan(q, k);
  ASSERT_EQ(passes.size(), 2u);
  expect_exact(q, k, passes, "overlap, keys first");
  // And keys starting later than the queries: queries 4-5 see nothing.
  Tokens k2;
  for (int p = 6; p < 9; ++p) k2.add(0, p);
  const std::vector<SdpaPass> later = plan(q, k2);
  ASSERT_EQ(later.size(), 1u);
  EXPECT_TRUE(later[0].causal);
  EXPECT_EQ(later[0].docs, (std::vector<DocumentPair>{{2, 4, 0, 3}}));
  expect_exact(q, k2, later, "overlap, queries first");
}

TEST(CudnnBlockDocuments, PositionGapsAndSplitSamplesStayExact) {
  // A sample whose rows come back later, positions that jump, and samples
  // the other block lacks.
  Tokens q, k;
  for (int p : {0, 1, 2, 7, 8}) q.add(3, p);
  for (int p = 0; p < 3; ++p) q.add(9, p);
  for (int p : {3, 4}) q.add(3, p);
  for (int p : {5, 6, 0, 1, 2, 3, 4}) k.add(3, p);
  for (int p = 0; p < 4; ++p) k.add(11, p);
  expect_exact(q, k, plan(q, k), "gaps");
}

TEST(CudnnBlockDocuments, EveryZigzagRingStepIsExact) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 40; ++trial) {
    const int k = 1 + int(rng() % 4);
    std::vector<int> lengths;
    int total = 0;
    const int target = 2 * k * (2 + int(rng() % 12));
    while (total < target) {
      const int len = std::min(target - total, 1 + int(rng() % 40));
      lengths.push_back(len);
      total += len;
    }
    const Tokens all = packed(lengths);
    for (int r = 0; r < k; ++r)
      for (int s = 0; s < k; ++s) {
        const Tokens q = zigzag_share(all, k, r), kv = zigzag_share(all, k, s);
        expect_exact(q, kv, plan(q, kv),
                     "trial " + std::to_string(trial) + " member " + std::to_string(r) + " block " +
                         std::to_string(s));
        if (HasFatalFailure()) return;
      }
  }
}

TEST(CudnnBlockDocuments, UlyssesGatheredZigzagTokensAreExact) {
  // After the all-to-all the group's tokens are every member's share in
  // member order: one sample's rows in several runs. Up to 4 members this
  // fits in the 4 passes (adjacent fully visible chunks merge).
  for (int k : {2, 3, 4}) {
    const Tokens all = packed({3 * k, 10 * k, 5 * k, 2 * k});
    Tokens gathered;
    for (int r = 0; r < k; ++r) gathered.append(zigzag_share(all, k, r));
    expect_exact(gathered, gathered, plan(gathered, gathered), "gathered k=" + std::to_string(k));
  }
}

TEST(CudnnBlockDocuments, TooManyPassesAreRefusedWithTheReason) {
  // One query run against many key runs of its sample: each key run's full
  // document shares the query rows, so each needs a pass of its own.
  Tokens q, k;
  for (int p = 40; p < 44; ++p) q.add(0, p);
  for (int r = 0; r <= kMaxSdpaPasses; ++r) {
    k.add(0, 2 * r);
    k.add(1, 0);  // breaks the run
  }
  std::string why;
  EXPECT_FALSE(block_documents(q.sample, q.pos, k.sample, k.pos, &why));
  EXPECT_NE(why.find("passes"), std::string::npos) << why;
}

TEST(CudnnBlockDocuments, InconsistentCountsAreRefused) {
  const std::vector<int32_t> two{0, 0}, one{0};
  std::string why;
  EXPECT_FALSE(block_documents(two, one, two, two, &why));
  EXPECT_FALSE(why.empty());
}

TEST(CudnnBlockDocuments, PassTablesPadWithEmptyDocumentsAtTheEnd) {
  const SdpaPass p{false, {{2, 3, 5, 4}, {7, 1, 0, 2}}};
  EXPECT_EQ(pass_q_lengths(p, 4), (std::vector<int32_t>{3, 1, 0, 0}));
  EXPECT_EQ(pass_kv_lengths(p, 4), (std::vector<int32_t>{4, 2, 0, 0}));
  EXPECT_EQ(pass_q_offsets(p, 4, 10, 8), (std::vector<int32_t>{16, 56, 80, 80, 80}));
  EXPECT_EQ(pass_kv_offsets(p, 4, 9, 2), (std::vector<int32_t>{10, 0, 18, 18, 18}));
}

}  // namespace
}  // namespace meshloom::cudnn
