// Indexed datasets: writer/reader round trips in both dtypes, the exact byte
// layout, every corrupt-index case with its message, and a cross-check with
// the independent Python reader (scripts/data/megatron_idx.py).
#include "data/indexed_dataset.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "tests/common/test_util.hpp"

namespace meshloom::data {
namespace {

using test::TempDir;

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::vector<int32_t>> random_docs(uint32_t seed, size_t n, int32_t max_id) {
  std::mt19937 rng(seed);
  std::vector<std::vector<int32_t>> docs(n);
  for (size_t i = 0; i < n; ++i) {
    // Mostly short, some long, one empty.
    const size_t len = i == 3 ? 0 : (rng() % 8 == 0 ? 1000 + rng() % 5000 : rng() % 50 + 1);
    std::uniform_int_distribution<int32_t> id(0, max_id);
    for (size_t k = 0; k < len; ++k) docs[i].push_back(id(rng));
  }
  docs[1].assign({0, max_id, max_id - 1, 0});  // the extremes
  return docs;
}

void write_docs(const std::string& prefix, TokenDtype dtype,
                const std::vector<std::vector<int32_t>>& docs) {
  IndexedDatasetWriter w(prefix, dtype);
  for (const auto& d : docs) w.add_document(d);
  w.finalize();
}

void expect_round_trip(TokenDtype dtype, int32_t max_id) {
  TempDir dir;
  const std::string prefix = dir.file("ds");
  const auto docs = random_docs(42, 200, max_id);
  write_docs(prefix, dtype, docs);

  IndexedDataset ds(prefix);
  EXPECT_EQ(ds.dtype(), dtype);
  ASSERT_EQ(ds.size(), docs.size());
  EXPECT_EQ(ds.num_documents(), docs.size());
  uint64_t total = 0;
  for (size_t i = 0; i < docs.size(); ++i) {
    EXPECT_EQ(ds.length(i), static_cast<int32_t>(docs[i].size())) << i;
    EXPECT_EQ(ds.tokens(i).to_vector(), docs[i]) << "document " << i;
    EXPECT_EQ(ds.document_sequences(i), std::make_pair(i, i + 1));
    total += docs[i].size();
  }
  EXPECT_EQ(ds.num_tokens(), total);
  // Random access in any order, and sub-ranges.
  EXPECT_EQ(ds.tokens(150).to_vector(), docs[150]);
  EXPECT_EQ(ds.tokens(0).to_vector(), docs[0]);
  std::vector<int32_t> part;
  ds.tokens(1).append_range(1, 2, &part);
  EXPECT_EQ(part, (std::vector<int32_t>{max_id, max_id - 1}));

  const std::vector<int64_t> lengths = read_document_lengths(prefix);
  ASSERT_EQ(lengths.size(), docs.size());
  for (size_t i = 0; i < docs.size(); ++i)
    EXPECT_EQ(lengths[i], static_cast<int64_t>(docs[i].size()));
  EXPECT_EQ(std::filesystem::file_size(bin_path(prefix)), total * dtype_bytes(dtype));
}

TEST(IndexedDataset, RoundTripUint16) { expect_round_trip(TokenDtype::kUint16, 65535); }
TEST(IndexedDataset, RoundTripInt32) { expect_round_trip(TokenDtype::kInt32, 2147483647); }

TEST(IndexedDataset, DtypeForVocab) {
  EXPECT_EQ(dtype_for_vocab(257), TokenDtype::kUint16);
  EXPECT_EQ(dtype_for_vocab(50257), TokenDtype::kUint16);
  EXPECT_EQ(dtype_for_vocab(65536), TokenDtype::kUint16);  // ids 0..65535 fit
  EXPECT_EQ(dtype_for_vocab(65537), TokenDtype::kInt32);
  EXPECT_EQ(dtype_for_vocab(100277), TokenDtype::kInt32);
  EXPECT_EQ(static_cast<int>(TokenDtype::kUint16), 8);  // Megatron's codes
  EXPECT_EQ(static_cast<int>(TokenDtype::kInt32), 4);
}

// The .idx bytes are exactly Megatron's layout.
TEST(IndexedDataset, IndexLayoutIsMegatrons) {
  TempDir dir;
  const std::string prefix = dir.file("ds");
  write_docs(prefix, TokenDtype::kUint16, {{1, 2, 3}, {4}, {5, 6}});
  const std::string idx = read_bytes(idx_path(prefix));
  ASSERT_EQ(idx.size(), 34u + 3 * 4 + 3 * 8 + 4 * 8);
  EXPECT_EQ(idx.substr(0, 9), std::string("MMIDIDX\0\0", 9));
  auto u64 = [&idx](size_t off) {
    uint64_t v;
    std::memcpy(&v, idx.data() + off, 8);
    return v;
  };
  auto i32 = [&idx](size_t off) {
    int32_t v;
    std::memcpy(&v, idx.data() + off, 4);
    return v;
  };
  EXPECT_EQ(u64(9), 1u);                        // version
  EXPECT_EQ(static_cast<uint8_t>(idx[17]), 8);  // uint16
  EXPECT_EQ(u64(18), 3u);                       // sequences
  EXPECT_EQ(u64(26), 4u);                       // document indices = documents + 1
  EXPECT_EQ(i32(34), 3);
  EXPECT_EQ(i32(38), 1);
  EXPECT_EQ(i32(42), 2);
  EXPECT_EQ(u64(46), 0u);  // pointers: byte offsets
  EXPECT_EQ(u64(54), 6u);
  EXPECT_EQ(u64(62), 8u);
  for (uint64_t k = 0; k < 4; ++k) EXPECT_EQ(u64(70 + 8 * k), k);  // document indices 0..3
  const std::string bin = read_bytes(bin_path(prefix));
  EXPECT_EQ(bin, std::string("\1\0\2\0\3\0\4\0\5\0\6\0", 12));
}

TEST(IndexedDataset, EmptyDataset) {
  TempDir dir;
  write_docs(dir.file("e"), TokenDtype::kUint16, {});
  IndexedDataset ds(dir.file("e"));
  EXPECT_EQ(ds.size(), 0u);
  EXPECT_EQ(ds.num_documents(), 0u);
  EXPECT_TRUE(read_document_lengths(dir.file("e")).empty());
}

TEST(IndexedDataset, WriterRejectsTokensThatDoNotFit) {
  TempDir dir;
  IndexedDatasetWriter w(dir.file("w"), TokenDtype::kUint16);
  const std::vector<int32_t> big{1, 65536};
  const std::vector<int32_t> negative{-1};
  EXPECT_THROW(
      {
        try {
          w.add_document(big);
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("token 65536"), std::string::npos) << e.what();
          EXPECT_NE(std::string(e.what()).find("uint16"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
  EXPECT_THROW(w.add_document(negative), Error);
  w.add_document(std::vector<int32_t>{7});
  w.finalize();
  IndexedDataset ds(dir.file("w"));  // the rejected documents left no trace
  ASSERT_EQ(ds.size(), 1u);
  EXPECT_EQ(ds.tokens(0).to_vector(), std::vector<int32_t>{7});
}

TEST(IndexedDataset, UnfinalizedWriterLeavesNothing) {
  TempDir dir;
  {
    IndexedDatasetWriter w(dir.file("u"), TokenDtype::kInt32);
    w.add_document(std::vector<int32_t>{1, 2, 3});
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(IndexedDataset, WriterNamesAnUnwritablePrefix) {
  try {
    IndexedDatasetWriter w("/nonexistent-dir/x", TokenDtype::kUint16);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/x.bin.tmp"), std::string::npos);
  }
}

// Multi-sequence documents, as Megatron's own tools can write them.
std::string raw_index(uint8_t code, const std::vector<int32_t>& lengths,
                      const std::vector<int64_t>& pointers, const std::vector<int64_t>& docs,
                      uint64_t version = 1) {
  std::string s("MMIDIDX\0\0", 9);
  auto put = [&s](const void* p, size_t n) { s.append(static_cast<const char*>(p), n); };
  put(&version, 8);
  put(&code, 1);
  const uint64_t n = lengths.size(), d = docs.size();
  put(&n, 8);
  put(&d, 8);
  put(lengths.data(), 4 * n);
  put(pointers.data(), 8 * pointers.size());
  put(docs.data(), 8 * d);
  return s;
}

// A .bin truncated while mapped: reading it is a bus error, which names the
// file and exits 2 (bad input) instead of a bare "Bus error".
TEST(IndexedDatasetDeathTest, TruncatedWhileMappedNamesTheFile) {
  TempDir dir;
  const std::string prefix = dir.file("live");
  write_docs(prefix, TokenDtype::kUint16, random_docs(7, 50, 1000));
  IndexedDataset ds(prefix);
  std::filesystem::resize_file(bin_path(prefix), 0);
  EXPECT_EXIT(
      {
        int64_t sum = 0;
        for (size_t i = 0; i < ds.size(); ++i)
          for (int32_t t : ds.tokens(i).to_vector()) sum += t;
        std::printf("%lld\n", static_cast<long long>(sum));
      },
      testing::ExitedWithCode(2), "live.bin: bus error reading it: the file was truncated");
}

TEST(IndexedDataset, MultiSequenceDocuments) {
  TempDir dir;
  const std::string p = dir.file("m");
  test::write_file(idx_path(p), raw_index(4, {2, 1, 3}, {0, 8, 12}, {0, 2, 3}));
  test::write_file(bin_path(p), std::string(24, '\0'));
  IndexedDataset ds(p);
  EXPECT_EQ(ds.size(), 3u);
  EXPECT_EQ(ds.num_documents(), 2u);
  EXPECT_EQ(ds.document_sequences(0), std::make_pair(size_t{0}, size_t{2}));
  EXPECT_EQ(ds.document_sequences(1), std::make_pair(size_t{2}, size_t{3}));
  EXPECT_EQ(read_document_lengths(p), (std::vector<int64_t>{3, 3}));
}

// ------------------------------------------------------------ corrupt files

// A good 5-document uint16 dataset to break.
class CorruptIndex : public ::testing::Test {
 protected:
  void SetUp() override {
    prefix_ = dir_.file("c");
    write_docs(prefix_, TokenDtype::kUint16, {{1, 2, 3}, {4, 5}, {6}, {7, 8, 9, 10}, {11}});
    idx_ = read_bytes(idx_path(prefix_));
  }
  void put_u64(size_t off, uint64_t v) { std::memcpy(idx_.data() + off, &v, 8); }
  void put_i32(size_t off, int32_t v) { std::memcpy(idx_.data() + off, &v, 4); }
  void put_i64(size_t off, int64_t v) { std::memcpy(idx_.data() + off, &v, 8); }
  static constexpr size_t kLengths = 34, kPointers = 34 + 5 * 4, kDocs = 34 + 5 * 12;

  // Opening fails with a message that names `file` and contains `what`; the
  // index-only reader fails the same way unless the problem is in .bin.
  void expect_error(const std::string& what, const std::string& file = "",
                    bool idx_only_too = true) {
    test::write_file(idx_path(prefix_), idx_);
    const std::string named = file.empty() ? idx_path(prefix_) : file;
    try {
      IndexedDataset ds(prefix_);
      FAIL() << "opened a corrupt dataset; expected: " << what;
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(what), std::string::npos) << msg;
      EXPECT_NE(msg.find(named), std::string::npos) << msg;
    }
    if (idx_only_too) {
      EXPECT_THROW(read_document_lengths(prefix_), Error);
    }
  }

  TempDir dir_;
  std::string prefix_;
  std::string idx_;
};

TEST_F(CorruptIndex, MissingIdx) {
  std::filesystem::remove(idx_path(prefix_));
  try {
    IndexedDataset ds(prefix_);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot open " + idx_path(prefix_)), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("No such file"), std::string::npos);
  }
  EXPECT_THROW(read_document_lengths(prefix_), Error);
}

TEST_F(CorruptIndex, MissingBin) {
  std::filesystem::remove(bin_path(prefix_));
  expect_error("cannot open " + bin_path(prefix_), bin_path(prefix_), false);
  EXPECT_EQ(read_document_lengths(prefix_).size(), 5u);  // needs only the .idx
}

TEST_F(CorruptIndex, WrongMagic) {
  idx_[3] = 'X';
  expect_error("wrong magic");
}

TEST_F(CorruptIndex, EmptyFile) {
  idx_.clear();
  expect_error("truncated");
}

TEST_F(CorruptIndex, UnsupportedVersion) {
  put_u64(9, 2);
  expect_error("unsupported version 2");
}

TEST_F(CorruptIndex, UnknownDtype) {
  idx_[17] = 9;
  expect_error("unsupported dtype code 9");
}

TEST_F(CorruptIndex, FloatDtype) {
  idx_[17] = 7;
  expect_error("unsupported dtype float32");
}

TEST_F(CorruptIndex, TruncatedHeader) {
  idx_.resize(20);
  expect_error("truncated: 20 bytes");
}

TEST_F(CorruptIndex, TruncatedArrays) {
  idx_.resize(idx_.size() - 5);
  expect_error("truncated");
}

TEST_F(CorruptIndex, HugeCountsDoNotOverflow) {
  put_u64(18, uint64_t{1} << 62);
  expect_error("truncated");
}

TEST_F(CorruptIndex, ExtraBytes) {
  idx_ += "xyz";
  expect_error("counts do not match the file size");
}

TEST_F(CorruptIndex, CountTooSmall) {
  put_u64(18, 4);
  expect_error("counts do not match the file size");
}

TEST_F(CorruptIndex, PointerPastEndOfBin) {
  put_i64(kPointers + 8 * 4, 1000);
  expect_error("runs past the end of " + bin_path(prefix_), "", false);
}

TEST_F(CorruptIndex, LengthPastEndOfBin) {
  put_i32(kLengths + 4 * 4, 2);
  expect_error("sequence 4 (bytes 20..24) runs past the end", "", false);
}

TEST_F(CorruptIndex, BinTruncated) {
  test::write_file(bin_path(prefix_), std::string(10, '\0'));
  expect_error("runs past the end of " + bin_path(prefix_) + " (10 bytes)", "", false);
}

TEST_F(CorruptIndex, NonMonotonePointers) {
  put_i64(kPointers + 8 * 2, 2);  // sequence 2 before sequence 1 (at byte 6)
  expect_error("pointers are not monotone: sequence 2");
}

TEST_F(CorruptIndex, OverlappingSequences) {
  put_i64(kPointers + 8 * 1, 4);  // sequence 0 covers bytes 0..6
  expect_error("inside sequence 0");
}

TEST_F(CorruptIndex, MisalignedPointer) {
  put_i64(kPointers + 8 * 4, 21);
  expect_error("not a multiple of the uint16 size");
}

TEST_F(CorruptIndex, NegativeLength) {
  put_i32(kLengths + 4 * 2, -1);
  expect_error("sequence 2 has a negative length");
}

TEST_F(CorruptIndex, BadDocumentIndices) {
  put_i64(kDocs + 8 * 5, 4);
  expect_error("the last document index is 4");
  put_i64(kDocs + 8 * 5, 5);
  put_i64(kDocs + 8 * 3, 1);
  expect_error("document index 3 is 1 after 2");
  put_i64(kDocs + 8 * 3, 3);
  put_i64(kDocs, 1);
  expect_error("document index 0 is 1");
}

// ------------------------------------------------------------ Python cross-check

// Our int32 writer's output read by the independent Python reader (the uint16
// path and the reverse direction are covered by the data.python_crosscheck
// ctest, which runs the script on `meshloom prepare` output).
TEST(IndexedDataset, PythonReaderAgreesInt32) {
  const std::string python = "/usr/bin/python3";
  const std::string script = std::string(MESHLOOM_SOURCE_DIR) + "/scripts/data/megatron_idx.py";
  if (!std::filesystem::exists(python)) GTEST_SKIP() << "no " << python;
  TempDir dir;
  const std::string prefix = dir.file("py");
  const auto docs = random_docs(7, 60, 2147483647);
  write_docs(prefix, TokenDtype::kInt32, docs);
  std::string expected;
  for (const auto& d : docs) {
    for (size_t k = 0; k < d.size(); ++k) {
      if (k > 0) expected += ' ';
      expected += std::to_string(d[k]);
    }
    expected += "\n";
  }
  const std::string out = dir.file("dump.txt");
  const std::string cmd = python + " " + script + " dump " + prefix + " > " + out;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  EXPECT_EQ(read_bytes(out), expected);
}

}  // namespace
}  // namespace meshloom::data
