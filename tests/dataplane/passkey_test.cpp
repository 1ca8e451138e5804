// Passkey prompts (dataplane/passkey.hpp): every sequence fits its length,
// the needle holds the true key at its depth, the question ends the prompt,
// the candidates are distinct 5-digit keys, scoring starts at the prompt's
// last token, the same seed gives the same prompts, and the grid counts a
// trial correct only when the true key scores strictly highest.
#include "dataplane/passkey.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "base/check.hpp"

using namespace meshloom;
using namespace meshloom::dataplane;

namespace {

// Bytes as tokens: the prompt can be read back as text.
std::vector<int32_t> bytes(const std::string& s) {
  return std::vector<int32_t>(s.begin(), s.end());
}
std::string text(const std::vector<int32_t>& t, size_t from, size_t n) {
  std::string s;
  for (size_t i = from; i < from + n && i < t.size(); ++i) s.push_back(char(t[i]));
  return s;
}

config::PasskeyConfig spec() {
  config::PasskeyConfig k;
  k.lengths = {200, 400};
  k.depths = {0, 0.5, 1};
  k.trials = 3;
  k.decoys = 4;
  return k;
}

}  // namespace

TEST(Passkey, PromptsHideTheKeyAtItsDepthAndFitTheirLength) {
  const std::vector<int32_t> filler = bytes(std::string(300, '.') + std::string(300, '-'));
  const auto prompts = passkey_prompts(spec(), 7, filler, bytes);
  ASSERT_EQ(prompts.size(), 2u * 3 * 3);
  for (const PasskeyPrompt& p : prompts) {
    ASSERT_EQ(p.candidates.size(), 5u);
    std::set<std::string> distinct(p.candidates.begin(), p.candidates.end());
    EXPECT_EQ(distinct.size(), 5u);
    for (const std::string& c : p.candidates) EXPECT_EQ(c.size(), 5u) << c;
    const std::string needle = " The pass key is " + p.candidates[0] + ". Remember it. " +
                               p.candidates[0] + " is the pass key. ";
    const std::string question = " What is the pass key? The pass key is";
    for (size_t c = 0; c < p.sequences.size(); ++c) {
      const std::vector<int32_t>& s = p.sequences[c];
      EXPECT_LE(int64_t(s.size()), p.length);
      EXPECT_GE(int64_t(s.size()), p.length - kAnswerRoom);
      EXPECT_EQ(text(s, size_t(p.needle_at), needle.size()), needle);
      const size_t prompt = size_t(p.scored_from) + 1;
      EXPECT_EQ(text(s, prompt - question.size(), question.size()), question);
      EXPECT_EQ(text(s, prompt, s.size() - prompt), " " + p.candidates[c]);
    }
    const int64_t filler_tokens =
        int64_t(p.sequences[0].size()) - 6 - int64_t(needle.size()) - int64_t(question.size());
    EXPECT_EQ(p.needle_at, int64_t(p.depth * double(filler_tokens)));
  }
  // The same seed, the same prompts; another seed, other keys.
  const auto again = passkey_prompts(spec(), 7, filler, bytes);
  const auto other = passkey_prompts(spec(), 8, filler, bytes);
  EXPECT_EQ(again[5].sequences, prompts[5].sequences);
  EXPECT_NE(other[5].candidates, prompts[5].candidates);
}

TEST(Passkey, ALengthTooShortForTheNeedleIsRefused) {
  config::PasskeyConfig k = spec();
  k.lengths = {64};
  try {
    passkey_prompts(k, 1, bytes("text"), bytes);
    FAIL() << "a prompt length shorter than its needle was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("eval.passkey.lengths"), std::string::npos) << e.what();
  }
}

TEST(Passkey, ATrialIsCorrectOnlyWhenTheTrueKeyScoresStrictlyHighest) {
  config::PasskeyConfig k = spec();
  k.lengths = {200};
  k.depths = {0.5};
  k.trials = 3;
  k.decoys = 2;
  const auto prompts = passkey_prompts(k, 3, bytes(std::string(500, 'x')), bytes);
  const auto grid = passkey_grid(prompts, {{-1, -2, -3}, {-2, -1, -3}, {-1, -1, -3}});
  ASSERT_EQ(grid.size(), 1u);
  EXPECT_EQ(grid[0].trials, 3);
  EXPECT_EQ(grid[0].correct, 1) << "a tie is not a retrieval";
  EXPECT_DOUBLE_EQ(grid[0].key_logprob, -4.0 / 3);
}
