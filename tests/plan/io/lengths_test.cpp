// Length distributions, token counts and batch drawing.
#include "plan/io/lengths.hpp"

#include <gtest/gtest.h>

#include "base/check.hpp"

using namespace meshloom;
using namespace meshloom::plan;

namespace {

constexpr int64_t K = 1024, M = 1024 * 1024;

std::vector<int64_t> draw(const std::string& name, int n, uint64_t seed) {
  const LengthSampler s = LengthSampler::named(name);
  Rng rng(seed);
  std::vector<int64_t> out(n);
  for (int64_t& L : out) L = s.draw(rng);
  return out;
}

}  // namespace

TEST(Distributions, BytedMatchesThePublishedShares) {
  const auto v = draw("byted", 2000000, 1);
  // ByteScale 3.1: ~80% of samples <= 4K; the 1% >= 128K carry 44.3% of the
  // tokens; the 0.05% at 2M carry 12.1%; 8.2: 37% of tokens from > 256K.
  EXPECT_NEAR(sample_share_at_most(v, 4 * K), 0.80, 0.01);
  EXPECT_NEAR(1 - sample_share_at_most(v, 128 * K - 1), 0.01, 0.0005);
  EXPECT_NEAR(token_share_above(v, 128 * K, false), 0.443, 0.03);
  EXPECT_NEAR(1 - sample_share_at_most(v, 2 * M - 1), 0.0005, 0.0001);
  EXPECT_NEAR(token_share_above(v, 2 * M, false), 0.121, 0.015);
  EXPECT_NEAR(token_share_above(v, 256 * K, true), 0.37, 0.03);
  EXPECT_NEAR(LengthSampler::named("byted").mean(), 8666, 150);
}

TEST(Distributions, GithubMatchesThePublishedShares) {
  const auto v = draw("github", 2000000, 2);
  // ByteScale 8.2: 16.2% of tokens from sequences > 128K, 9.8% from > 256K.
  EXPECT_NEAR(token_share_above(v, 128 * K, true), 0.162, 0.02);
  EXPECT_NEAR(token_share_above(v, 256 * K, true), 0.098, 0.015);
  EXPECT_GT(sample_share_at_most(v, 4 * K), 0.8);
}

TEST(Distributions, SimpleOnesAndErrors) {
  for (int64_t L : draw("fixed:4K", 100, 3)) EXPECT_EQ(L, 4096);
  for (int64_t L : draw("loguniform:16:1M", 10000, 4)) {
    EXPECT_GE(L, 16);
    EXPECT_LT(L, M);
  }
  EXPECT_EQ(draw("byted", 1000, 9), draw("byted", 1000, 9)) << "same seed, same draws";
  EXPECT_NE(draw("byted", 1000, 9), draw("byted", 1000, 10));
  try {
    LengthSampler::named("bytde");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'byted'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(LengthSampler::named("loguniform:5:5"), Error);
}

TEST(Tokens, ParseAndFormat) {
  EXPECT_EQ(parse_tokens("32768"), 32768);
  EXPECT_EQ(parse_tokens("256K"), 256 * K);
  EXPECT_EQ(parse_tokens("2M"), 2 * M);
  EXPECT_EQ(parse_tokens("1.5K"), 1536);
  EXPECT_EQ(parse_tokens("1G"), 1024 * M);
  EXPECT_THROW(parse_tokens("2X"), Error);
  EXPECT_THROW(parse_tokens("-4"), Error);
  EXPECT_THROW(parse_tokens(""), Error);
  EXPECT_EQ(format_tokens(2 * M), "2M");
  EXPECT_EQ(format_tokens(8 * K), "8K");
  EXPECT_EQ(format_tokens(1000), "1000");
}

TEST(Batch, FillsTheBudgetExactlyAndCutsAtTheContext) {
  const LengthSampler s = LengthSampler::named("byted");
  for (uint64_t seed : {1, 2, 3}) {
    const auto b = draw_batch(s, 32 * M, 256 * K, seed);
    int64_t total = 0;
    for (int64_t L : b) {
      EXPECT_GE(L, 1);
      EXPECT_LE(L, 256 * K);
      total += L;
    }
    EXPECT_EQ(total, 32 * M);
    EXPECT_EQ(b, draw_batch(s, 32 * M, 256 * K, seed));
  }
}

TEST(Batch, FromALengthTable) {
  // All of the table, cut at the context, or a budget drawn from it.
  EXPECT_EQ(batch_from_lengths({5, 12, 3}, 0, 0, 1), (std::vector<int64_t>{5, 12, 3}));
  EXPECT_EQ(batch_from_lengths({5, 12, 3}, 0, 5, 1), (std::vector<int64_t>{5, 5, 5, 2, 3}));
  const auto b = batch_from_lengths({7, 100}, 1000, 64, 3);
  int64_t total = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    total += b[i];
    if (i + 1 < b.size()) {
      EXPECT_TRUE(b[i] == 7 || b[i] == 64 || b[i] == 36) << b[i];
    }
  }
  EXPECT_EQ(total, 1000);  // the last piece cut to fit
  EXPECT_EQ(b, batch_from_lengths({7, 100}, 1000, 64, 3)) << "same seed, same batch";
  EXPECT_THROW(batch_from_lengths({}, 1000, 64, 3), Error);
}
