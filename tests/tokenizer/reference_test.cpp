// The tokenizers against the real ones: ids on every line of the reference
// file (gpt2, cl100k_base), known o200k ids checked with the npm tiktoken
// package, and decode(encode(x)) == x on every reference text.
#include <gtest/gtest.h>

#include "tokenizer/tokenizer.hpp"
#include "tokenizer_test_util.hpp"

namespace meshloom::tokenizer {
namespace {

using test::reference_lines;
using test::tokenizer;

void expect_reference_ids(const std::string& spec, const std::string& key) {
  std::string error;
  const auto lines = reference_lines(&error);
  ASSERT_TRUE(error.empty()) << error;
  const Tokenizer& tok = tokenizer(spec);
  size_t compared = 0;
  for (const auto& line : lines) {
    auto it = line.ids.find(key);
    ASSERT_NE(it, line.ids.end()) << "line " << line.name << " has no " << key << " ids";
    const std::vector<int32_t> ids = line.special_allowed.empty()
                                         ? tok.encode(line.text)
                                         : tok.encode_with_special(line.text, line.special_allowed);
    EXPECT_EQ(ids, it->second) << spec << " on reference line '" << line.name << "'";
    ++compared;
  }
  EXPECT_GE(compared, 20u);
}

TEST(tokenizer, Gpt2IdsEqualReferenceOnEveryLine) { expect_reference_ids("gpt2", "gpt2"); }

TEST(tokenizer, Cl100kIdsEqualReferenceOnEveryLine) {
  expect_reference_ids("tiktoken:cl100k_base", "cl100k_base");
}

// tiktoken's own gpt2 rank file uses the concatenation rule instead of the
// merges list; both must give GPT-2's ids.
TEST(tokenizer, TiktokenGpt2RankFileEqualsReference) {
  expect_reference_ids("tiktoken:gpt2", "gpt2");
}

TEST(tokenizer, DecodeEncodeRoundTripsEveryReferenceText) {
  std::string error;
  const auto lines = reference_lines(&error);
  ASSERT_TRUE(error.empty()) << error;
  for (const char* spec : {"gpt2", "tiktoken:cl100k_base", "tiktoken:o200k_base", "byte"}) {
    const Tokenizer& tok = tokenizer(spec);
    for (const auto& line : lines) {
      const std::vector<int32_t> ids = tok.encode(line.text);
      for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok.vocab_size()) << spec << " " << id;
      EXPECT_EQ(tok.decode(ids), line.text) << spec << " on '" << line.name << "'";
    }
  }
}

// Ids from the npm tiktoken package (o200k_base), covering its case-split
// letters, contractions glued to words, [\r\n/]* after punctuation, CJK, and
// pieces longer than the stack merge path (300 bytes).
TEST(tokenizer, O200kKnownIds) {
  const Tokenizer& tok = tokenizer("tiktoken:o200k_base");
  EXPECT_EQ(tok.vocab_size(), 200019);
  EXPECT_EQ(tok.eot_id(), 199999);
  EXPECT_EQ(tok.encode("Hello, world!"), (std::vector<int32_t>{13225, 11, 2375, 0}));
  EXPECT_EQ(
      tok.encode("HELLO world, I'm HTTPServer's helloWorld don't"),
      (std::vector<int32_t>{111642, 2699, 2375, 11, 5477, 21929, 6444, 885, 40617, 13046, 4128}));
  EXPECT_EQ(tok.encode("path/to/file\r\n\r\n  x"),
            (std::vector<int32_t>{4189, 72231, 51766, 1414, 220, 1215}));
  EXPECT_EQ(tok.encode("你好，世界！ 1234567"),
            (std::vector<int32_t>{177519, 979, 28428, 3393, 220, 7633, 19354, 22}));
  EXPECT_EQ(tok.encode(std::string(300, ' ') + "x"),
            (std::vector<int32_t>{72056, 72056, 6322, 1215}));
  std::vector<int32_t> a300(37, 117525);
  a300.push_back(45037);
  EXPECT_EQ(tok.encode(std::string(300, 'a')), a300);
  EXPECT_EQ(tok.encode_with_special("a<|endoftext|>b", {"<|endoftext|>"}),
            (std::vector<int32_t>{64, 199999, 65}));
}

// Letters and digits new in Unicode 15.1/16.0 (unassigned in ICU 72) stay out
// of the punctuation piece, so ",z" merges; ids from the npm tiktoken package.
TEST(tokenizer, Unicode16LettersMatchReference) {
  const std::string egyptian = "\U00013460,z", cjk_ext_i = "\U0002EBF0,z", garay = "\U00010D40,z";
  const Tokenizer& o200k = tokenizer("tiktoken:o200k_base");
  EXPECT_EQ(o200k.encode(egyptian), (std::vector<int32_t>{172, 241, 239, 254, 54920}));
  EXPECT_EQ(o200k.encode(cjk_ext_i), (std::vector<int32_t>{172, 106, 107, 108, 54920}));
  EXPECT_EQ(o200k.encode(garay), (std::vector<int32_t>{172, 238, 113, 222, 54920}));
  EXPECT_EQ(tokenizer("tiktoken:cl100k_base").encode(egyptian),
            (std::vector<int32_t>{172, 241, 239, 254, 23500}));
}

// Long single pieces take the heap merge path; ids from the npm package.
TEST(tokenizer, LongPiecesMatchReference) {
  std::vector<int32_t> gpt2_a(75, 24794);
  EXPECT_EQ(tokenizer("gpt2").encode(std::string(300, 'a')), gpt2_a);
  std::vector<int32_t> cl_a(37, 70540);
  cl_a.push_back(29558);
  EXPECT_EQ(tokenizer("tiktoken:cl100k_base").encode(std::string(300, 'a')), cl_a);
  EXPECT_EQ(tokenizer("tiktoken:cl100k_base").encode(std::string(300, ' ') + "x"),
            (std::vector<int32_t>{58040, 58040, 3425, 865}));
  const std::vector<int32_t> spaces = tokenizer("gpt2").encode(std::string(300, ' ') + "x");
  ASSERT_EQ(spaces.size(), 300u);  // GPT-2 has no multi-space tokens: 299 x " " then " x"
  EXPECT_EQ(spaces.front(), 220);
  EXPECT_EQ(spaces.back(), 2124);
}

}  // namespace
}  // namespace meshloom::tokenizer
