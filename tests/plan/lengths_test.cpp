// Length distributions, length files and batch drawing.
#include "plan/lengths.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "tests/common/test_util.hpp"

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

TEST(LengthFiles, TsvPlainAndIdx) {
  test::TempDir dir;
  const std::string tsv = dir.file("a.tsv");
  test::write_file(tsv,
                   "name\tgpt2_tokens\tutf8_bytes\nx.c\t120\t400\nempty.c\t0\t0\ny.h\t7\t20\n");
  EXPECT_EQ(read_lengths(tsv), (std::vector<int64_t>{120, 7}));
  const std::string plain = dir.file("b.txt");
  test::write_file(plain, "5\n# comment\n6\n");
  EXPECT_EQ(read_lengths(plain), (std::vector<int64_t>{5, 6}));
  const std::string bad = dir.file("c.tsv");
  test::write_file(bad, "name\tgpt2_tokens\nx\tabc\n");
  try {
    read_lengths(bad);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("c.tsv:2"), std::string::npos) << e.what();
  }
  // A Megatron MMIDIDX index with three sequences.
  const std::string idx = dir.file("d.idx");
  {
    std::ofstream f(idx, std::ios::binary);
    const uint64_t version = 1, seqs = 3, docs = 4;
    const uint8_t dtype = 8;
    const int32_t lens[3] = {10, 20, 30};
    f.write("MMIDIDX\0\0", 9);
    f.write(reinterpret_cast<const char*>(&version), 8);
    f.write(reinterpret_cast<const char*>(&dtype), 1);
    f.write(reinterpret_cast<const char*>(&seqs), 8);
    f.write(reinterpret_cast<const char*>(&docs), 8);
    f.write(reinterpret_cast<const char*>(lens), 12);
  }
  EXPECT_EQ(read_lengths(idx), (std::vector<int64_t>{10, 20, 30}));
  // The hook: lib/data can install its own reader.
  set_idx_reader([](const std::string&) { return std::vector<int64_t>{42}; });
  EXPECT_EQ(read_lengths(idx), (std::vector<int64_t>{42}));
  set_idx_reader(read_mmidx_lengths);
}

TEST(LengthFiles, RealLinuxSources) {
  // bench/data/linux_c_h.tsv.xz, unpacked by the build.
  const std::string path = MESHLOOM_LINUX_LENGTHS;
  ASSERT_TRUE(std::filesystem::exists(path)) << "no " << path;
  const auto v = read_lengths(path);
  int64_t total = 0, longest = 0;
  for (int64_t L : v) {
    total += L;
    longest = std::max(longest, L);
  }
  // bench/data/README.md: 55,405 documents, 651M tokens, max 16.9M,
  // 45% of tokens in documents > 128K.
  EXPECT_NEAR(double(v.size()), 55405, 100);
  EXPECT_NEAR(double(total) / 1e6, 651, 2);
  EXPECT_NEAR(double(longest) / 1e6, 16.9, 0.1);
  EXPECT_NEAR(token_share_above(v, 128 * K, true), 0.45, 0.02);
}
