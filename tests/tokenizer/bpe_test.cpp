// BPE tokenizer properties: vocabulary facts, special tokens, the whole-token
// shortcut, thread safety, invalid UTF-8.
#include "tokenizer/bpe.hpp"

#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "base/check.hpp"
#include "tokenizer_test_util.hpp"

namespace meshloom::tokenizer {
namespace {

using test::tokenizer;

const BpeTokenizer& bpe(const std::string& spec) {
  return dynamic_cast<const BpeTokenizer&>(tokenizer(spec));
}

TEST(tokenizer, VocabularySizesAndEndOfText) {
  EXPECT_EQ(tokenizer("gpt2").vocab_size(), 50257);
  EXPECT_EQ(tokenizer("gpt2").eot_id(), 50256);
  EXPECT_EQ(tokenizer("gpt2").name(), "gpt2");
  EXPECT_EQ(tokenizer("tiktoken:cl100k_base").vocab_size(), 100277);
  EXPECT_EQ(tokenizer("tiktoken:cl100k_base").eot_id(), 100257);
  EXPECT_EQ(tokenizer("tiktoken:cl100k_base").name(), "cl100k_base");
  EXPECT_EQ(tokenizer("byte").eot_id(), 256);
  for (const char* spec : {"gpt2", "tiktoken:cl100k_base"}) {
    const Tokenizer& tok = tokenizer(spec);
    EXPECT_EQ(tok.decode({tok.eot_id()}), "<|endoftext|>") << spec;
  }
}

// encode() treats the text "<|endoftext|>" as text (a document cannot forge a
// boundary); encode_with_special() maps only the names it is given.
TEST(tokenizer, EndOfTextTextIsOrdinaryUnlessAllowed) {
  const Tokenizer& tok = tokenizer("gpt2");
  const std::vector<int32_t> plain = tok.encode("<|endoftext|>");
  EXPECT_GT(plain.size(), 1u);
  for (int32_t id : plain) EXPECT_NE(id, 50256);
  EXPECT_EQ(tok.encode_with_special("<|endoftext|>", {"<|endoftext|>"}),
            (std::vector<int32_t>{50256}));
  EXPECT_EQ(tok.encode_with_special("x<|endoftext|><|endoftext|>", {"<|endoftext|>"}),
            (std::vector<int32_t>{87, 50256, 50256}));
  EXPECT_EQ(tok.encode_with_special("no special here", {"<|endoftext|>"}),
            tok.encode("no special here"));
  EXPECT_THROW(tok.encode_with_special("x", {"<|fim_prefix|>"}), Error);
  EXPECT_THROW(tokenizer("byte").encode_with_special("x", {"<|endoftext|>"}), Error);
  const Tokenizer& cl = tokenizer("tiktoken:cl100k_base");
  // Not allowed: stays text even though cl100k knows it.
  const auto fim = cl.encode_with_special("<|fim_prefix|><|endoftext|>", {"<|endoftext|>"});
  EXPECT_EQ(fim.back(), 100257);
  EXPECT_GT(fim.size(), 2u);
}

TEST(tokenizer, DecodeRejectsIdsOutOfRange) {
  const Tokenizer& tok = tokenizer("gpt2");
  EXPECT_THROW(tok.decode({50257}), Error);
  EXPECT_THROW(tok.decode({-1}), Error);
  EXPECT_EQ(tok.decode({15496, 11, 995, 0}), "Hello, world!");
}

// encode() skips BPE for a piece that is a whole token. That is exact only if
// BPE would produce that token anyway; check it for every GPT-2 token.
TEST(tokenizer, EveryGpt2TokenMergesToItself) {
  const BpeTokenizer& tok = bpe("gpt2");
  int checked = 0;
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    if (id == tok.eot_id()) continue;
    const std::string_view bytes = tok.token_bytes(id);
    ASSERT_FALSE(bytes.empty()) << id;
    const std::vector<int32_t> ids = tok.merge_piece_uncached(bytes);
    ASSERT_EQ(ids, std::vector<int32_t>{id}) << "token " << id << " '" << bytes << "'";
    ++checked;
  }
  EXPECT_EQ(checked, 50256);
}

// Random bytes (mostly invalid UTF-8) and broken sequences: no crash, ids in
// range, and decode gives back the exact bytes, because an invalid byte is
// kept as a one-byte piece of punctuation class.
TEST(tokenizer, InvalidUtf8IsKeptByteExact) {
  const std::vector<std::string> broken = {"\xff",
                                           "abc\x80",
                                           "caf\xc3",
                                           "\xc3\x28",
                                           "\xe2\x82",
                                           "\xed\xa0\x80 surrogate",
                                           "\xc0\xaf overlong",
                                           "\xf4\x90\x80\x80 too big",
                                           "mixed \xf0\x9f\x91 emoji \xf0\x9f\x91\x8d",
                                           std::string("nul\0inside", 10)};
  std::mt19937 rng(7);
  std::vector<std::string> inputs = broken;
  for (int i = 0; i < 200; ++i) {
    std::string s(rng() % 64, '\0');
    for (char& c : s) c = static_cast<char>(rng());
    inputs.push_back(s);
  }
  for (const char* spec : {"gpt2", "tiktoken:cl100k_base", "tiktoken:o200k_base"}) {
    const Tokenizer& tok = tokenizer(spec);
    for (const std::string& s : inputs) {
      const std::vector<int32_t> ids = tok.encode(s);
      for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok.vocab_size());
      ASSERT_EQ(tok.decode(ids), s) << spec;
    }
  }
  // Valid text around an invalid byte tokenizes as if the byte were punctuation.
  const Tokenizer& g = tokenizer("gpt2");
  std::vector<int32_t> expect = g.encode("Hello");
  expect.push_back(g.encode("\xff").at(0));
  for (int32_t id : g.encode(" world")) expect.push_back(id);
  EXPECT_EQ(g.encode("Hello\xff world"), expect);
}

// Many distinct words: more than the per-thread cache holds (it is reset when
// full), so the reset path runs too.
std::string many_words(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::string text;
  for (int i = 0; i < n; ++i) {
    text += (i % 13 == 0) ? "\n" : " ";
    const int len = 3 + static_cast<int>(rng() % 9);
    for (int k = 0; k < len; ++k) text += static_cast<char>('a' + rng() % 26);
    if (i % 7 == 0) text += "'s";
  }
  return text;
}

TEST(tokenizer, EncodeIsThreadSafeAcrossTokenizers) {
  std::string error;
  const auto lines = test::reference_lines(&error);
  ASSERT_TRUE(error.empty()) << error;
  std::vector<std::string> texts;
  for (const auto& l : lines) texts.push_back(l.text);
  texts.push_back(many_words(40000, 1));
  const std::vector<std::string> specs = {"gpt2", "tiktoken:cl100k_base"};
  std::vector<std::vector<std::vector<int32_t>>> expected(specs.size());
  for (size_t s = 0; s < specs.size(); ++s)
    for (const auto& t : texts) expected[s].push_back(tokenizer(specs[s]).encode(t));

  std::vector<const Tokenizer*> toks;
  for (const auto& s : specs) toks.push_back(&tokenizer(s));
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 3; ++rep)
        for (size_t i = 0; i < texts.size(); ++i) {
          const size_t s = (i + t + rep) % specs.size();  // alternate tokenizers per thread
          if (toks[s]->encode(texts[i]) != expected[s][i]) ++mismatches;
        }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

// A second make_tokenizer for the same spec shares the loaded model and
// gives the same ids.
TEST(tokenizer, TokenizersOfOneSpecAgree) {
  auto a = make_tokenizer("gpt2");
  auto b = make_tokenizer("gpt2");
  const std::string text = many_words(2000, 3);
  EXPECT_EQ(a->encode(text), b->encode(text));
  EXPECT_EQ(a->decode(a->encode(text)), text);
}

}  // namespace
}  // namespace meshloom::tokenizer
