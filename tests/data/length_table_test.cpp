// Length tables (`--lengths` of plan and simulate): TSV, plain and .idx
// files, compressed ones, their error messages, and the real Linux source
// lengths.
#include "data/length_table.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "data/indexed_dataset.hpp"
#include "tests/common/test_util.hpp"

namespace meshloom::data {
namespace {

using test::TempDir;
using test::write_file;

// The message read_length_table throws for `path`.
std::string error_of(const std::string& path) {
  try {
    read_length_table(path);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error for " << path;
  return "";
}

TEST(LengthTable, TsvAndPlain) {
  TempDir dir;
  const std::string tsv = dir.file("a.tsv");
  write_file(tsv, "name\tgpt2_tokens\tutf8_bytes\nx.c\t120\t400\nempty.c\t0\t0\ny.h\t7\t20\n");
  EXPECT_EQ(read_length_table(tsv), (std::vector<int64_t>{120, 7}));
  const std::string plain = dir.file("b.txt");
  write_file(plain, "5\r\n# comment\n\n6\n");
  EXPECT_EQ(read_length_table(plain), (std::vector<int64_t>{5, 6}));
  // The same TSV through xz, as bench/data's tables travel.
  ASSERT_EQ(std::system(("xz -k " + tsv).c_str()), 0);
  EXPECT_EQ(read_length_table(tsv + ".xz"), (std::vector<int64_t>{120, 7}));
}

TEST(LengthTable, ErrorsNameTheFileAndLine) {
  TempDir dir;
  write_file(dir.file("c.tsv"), "name\tgpt2_tokens\nx\tabc\n");
  EXPECT_NE(error_of(dir.file("c.tsv")).find("c.tsv:2: expected a token count, got 'abc'"),
            std::string::npos);
  write_file(dir.file("d.tsv"), "name\tbytes\nx\t5\n");
  EXPECT_NE(error_of(dir.file("d.tsv")).find("d.tsv:1: a TSV header needs a gpt2_tokens"),
            std::string::npos);
  write_file(dir.file("e.txt"), "4\n-3\n");
  EXPECT_NE(error_of(dir.file("e.txt")).find("e.txt:2:"), std::string::npos);
  write_file(dir.file("f.txt"), "# only a comment\n0\n");
  EXPECT_NE(error_of(dir.file("f.txt")).find("f.txt' holds no lengths"), std::string::npos);
  EXPECT_NE(error_of(dir.file("missing.txt")).find("cannot read lengths file"), std::string::npos);
}

TEST(LengthTable, IdxGivesDocumentLengths) {
  // A real index from the project's writer: its empty document is dropped.
  TempDir dir;
  const std::string prefix = dir.file("ds");
  {
    IndexedDatasetWriter w(prefix, TokenDtype::kUint16);
    for (int32_t n : {10, 0, 20, 30}) w.add_document(std::vector<int32_t>(size_t(n), 7));
    w.finalize();
  }
  EXPECT_EQ(read_length_table(idx_path(prefix)), (std::vector<int64_t>{10, 20, 30}));

  const std::string empty = dir.file("empty");
  {
    IndexedDatasetWriter w(empty, TokenDtype::kUint16);
    w.add_document({});
    w.finalize();
  }
  EXPECT_NE(error_of(idx_path(empty)).find("holds no lengths"), std::string::npos);
  write_file(dir.file("junk.idx"), "not an index");
  EXPECT_NE(error_of(dir.file("junk.idx")).find("junk.idx"), std::string::npos);
}

TEST(LengthTable, RealLinuxSources) {
  // bench/data/linux_c_h.tsv.xz, read compressed.
  const std::string path = MESHLOOM_LINUX_LENGTHS;
  ASSERT_TRUE(std::filesystem::exists(path)) << "no " << path;
  const std::vector<int64_t> v = read_length_table(path);
  int64_t total = 0, over_128k = 0;
  for (int64_t L : v) {
    total += L;
    if (L > 128 * 1024) over_128k += L;
  }
  // bench/data/README.md: 55,405 documents, 651M tokens, max 16.9M,
  // 45% of tokens in documents > 128K.
  EXPECT_NEAR(double(v.size()), 55405, 100);
  EXPECT_NEAR(double(total) / 1e6, 651, 2);
  EXPECT_NEAR(double(*std::max_element(v.begin(), v.end())) / 1e6, 16.9, 0.1);
  EXPECT_NEAR(double(over_128k) / double(total), 0.45, 0.02);
}

}  // namespace
}  // namespace meshloom::data
