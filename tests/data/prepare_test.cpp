// The prepare pipeline: byte-identical output for any thread count, exact
// tokens (text bytes + end-of-text), counts in the report, and clean failure
// (an error, no hang, no output left behind) when a stage fails.
#include "data/prepare.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>

#include "tests/common/test_util.hpp"

namespace meshloom::data {
namespace {

using test::TempDir;
using test::write_file;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A byte-level tokenizer with knobs, so that the library tests do not depend
// on the real tokenizers (tested in tests/tokenizer).
class FakeTokenizer final : public tokenizer::Tokenizer {
 public:
  FakeTokenizer(int32_t vocab, int32_t eot, int32_t offset = 0, bool throw_on_x = false)
      : vocab_(vocab), eot_(eot), offset_(offset), throw_on_x_(throw_on_x) {}
  std::vector<int32_t> encode(std::string_view text) const override {
    if (throw_on_x_ && text.find("\x01THROW") != std::string_view::npos)
      throw std::runtime_error("tokenizer failure");
    std::vector<int32_t> ids;
    for (unsigned char c : text) ids.push_back(offset_ + c);
    return ids;
  }
  std::string decode(const int32_t*, size_t) const override { return ""; }
  int32_t vocab_size() const override { return vocab_; }
  int32_t eot_id() const override { return eot_; }
  std::string name() const override { return "fake"; }

 private:
  int32_t vocab_, eot_, offset_;
  bool throw_on_x_;
};

// ~600 documents over nested folders, several MiB, so that there are many
// batches of both kinds (by count and by bytes), plus problem cases.
struct Corpus {
  TempDir dir;
  std::vector<std::string> files;  // non-empty documents, in sorted order
  Corpus() {
    std::mt19937 rng(123);
    for (int i = 0; i < 600; ++i) {
      const std::string sub = dir.file(std::string("in/d") + std::to_string(i % 7));
      std::filesystem::create_directories(sub);
      const std::string path = sub + "/f" + std::to_string(1000 + i) + ".txt";
      size_t len = rng() % 3000 + 1;
      if (i % 150 == 0) len = 1500000;  // a few large ones: batches cut by bytes
      std::string text(len, ' ');
      for (char& c : text) c = static_cast<char>('a' + rng() % 26);
      if (i % 97 == 0) text += "\xC3\x28";  // invalid UTF-8
      write_file(path, text);
      files.push_back(path);
    }
    write_file(dir.file("in/d0/empty.txt"), "");
    std::sort(files.begin(), files.end());
  }
};

PrepareOptions options_for(const std::string& input, const std::string& out, int threads) {
  PrepareOptions o;
  o.inputs = {input};
  o.reader.format = config::SourceFormat::text;
  o.out_prefix = out;
  o.threads = threads;
  return o;
}

TEST(Prepare, ByteIdenticalForAnyThreadCountAndExact) {
  Corpus c;
  const FakeTokenizer tok(257, 256);
  std::string bin1, idx1;
  for (int threads : {1, 2, 3, 8}) {
    const std::string out = c.dir.file("out" + std::to_string(threads));
    const PrepareReport r = prepare_dataset(options_for(c.dir.file("in"), out, threads), tok);
    EXPECT_EQ(r.threads, threads);
    EXPECT_EQ(r.input.documents, 600u);
    EXPECT_EQ(r.input.empty, 1u);
    EXPECT_EQ(r.input.invalid_utf8_documents, 7u);  // i = 0, 97, ..., 582
    EXPECT_EQ(r.input.invalid_utf8_sequences, 7u);
    EXPECT_EQ(r.dtype, TokenDtype::kUint16);
    EXPECT_TRUE(r.eot_appended);
    EXPECT_EQ(r.tokens, r.text_bytes + 600);
    if (threads == 1) {
      bin1 = slurp(bin_path(out));
      idx1 = slurp(idx_path(out));
      ASSERT_GT(bin1.size(), 4u * (1 << 20));
    } else {
      EXPECT_TRUE(slurp(bin_path(out)) == bin1) << threads << " threads";
      EXPECT_TRUE(slurp(idx_path(out)) == idx1) << threads << " threads";
    }
  }
  // The content: document i is file i's bytes (repaired), then end-of-text.
  IndexedDataset ds(c.dir.file("out1"));
  ASSERT_EQ(ds.size(), c.files.size());
  for (size_t i = 0; i < c.files.size(); i += 37) {
    std::string text = slurp(c.files[i]);
    if (text.size() >= 2 && text.substr(text.size() - 2) == "\xC3\x28")
      text = text.substr(0, text.size() - 2) + "\xEF\xBF\xBD(";
    std::vector<int32_t> want(text.begin(), text.end());
    for (int32_t& t : want) t = static_cast<unsigned char>(t);
    want.push_back(256);
    EXPECT_EQ(ds.tokens(i).to_vector(), want) << c.files[i];
  }
}

TEST(Prepare, LargeVocabularyWritesInt32AndNoEot) {
  TempDir dir;
  write_file(dir.file("a.txt"), "hi");
  const FakeTokenizer tok(100000, -1, 70000);
  const PrepareReport r = prepare_dataset(options_for(dir.file("a.txt"), dir.file("o"), 2), tok);
  EXPECT_EQ(r.dtype, TokenDtype::kInt32);
  EXPECT_FALSE(r.eot_appended);
  IndexedDataset ds(dir.file("o"));
  EXPECT_EQ(ds.tokens(0).to_vector(), (std::vector<int32_t>{70000 + 'h', 70000 + 'i'}));
}

TEST(Prepare, ProgressIsReportedAndReachesTheTotal) {
  TempDir dir;
  for (int i = 0; i < 20; ++i)
    write_file(dir.file(std::string("f") += std::to_string(i)), "some text");
  PrepareOptions o = options_for(dir.path(), dir.file("out"), 2);
  o.reader.glob = "f*";
  std::vector<PrepareProgress> seen;
  o.on_progress = [&seen](const PrepareProgress& p) { seen.push_back(p); };
  prepare_dataset(o, FakeTokenizer(257, 256));
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back().documents, 20u);
  EXPECT_EQ(seen.back().input_done, seen.back().input_total);
  EXPECT_EQ(seen.back().input_total, 20u * 9);
}

TEST(Prepare, NoDocumentsIsAnErrorAndLeavesNoOutput) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("in"));
  write_file(dir.file("in/a.md"), "markdown");
  try {
    PrepareOptions o = options_for(dir.file("in"), dir.file("o"), 2);
    o.reader.glob = "*.txt";
    prepare_dataset(o, FakeTokenizer(257, 256));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no documents found in " + dir.file("in")),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("o.bin")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("o.bin.tmp")));
}

TEST(Prepare, WriterFailureStopsThePipelineCleanly) {
  Corpus c;
  // Ids above 65535 with a vocabulary that claims to fit uint16: the writer
  // throws while readers and workers are busy; nothing may hang.
  const FakeTokenizer tok(257, 256, 65500);
  EXPECT_THROW(prepare_dataset(options_for(c.dir.file("in"), c.dir.file("o"), 3), tok), Error);
  EXPECT_FALSE(std::filesystem::exists(c.dir.file("o.bin")));
  EXPECT_FALSE(std::filesystem::exists(c.dir.file("o.bin.tmp")));
}

TEST(Prepare, WorkerFailureStopsThePipelineCleanly) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("in"));
  for (int i = 0; i < 3000; ++i)
    write_file(dir.file("in/" + std::to_string(10000 + i)), i == 1500 ? "\x01THROW" : "text");
  const FakeTokenizer tok(257, 256, 0, /*throw_on_x=*/true);
  try {
    prepare_dataset(options_for(dir.file("in"), dir.file("o"), 2), tok);
    FAIL();
  } catch (const Error& e) {  // the tokenizer's exception, named and wrapped
    EXPECT_NE(std::string(e.what()).find(dir.file("in/11500") + ": tokenizer failure"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("o.idx")));
}

}  // namespace
}  // namespace meshloom::data
