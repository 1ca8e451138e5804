// Megatron-LM compatible indexed datasets: PREFIX.bin + PREFIX.idx.
//
// PREFIX.bin is every token of every sequence back to back, in one integer
// dtype. PREFIX.idx (Megatron's "MMIDIDX" layout, all little-endian) says where
// each sequence starts and how long it is:
//
//   9 bytes  magic "MMIDIDX\0\0"
//   u64      version (1)
//   u8       dtype code (1 uint8, 2 int8, 3 int16, 4 int32, 5 int64,
//                        6 float64, 7 float32, 8 uint16)
//   u64      sequence count S
//   u64      document-index count D (documents + 1)
//   int32[S] sequence lengths, in tokens
//   int64[S] sequence pointers, byte offsets into .bin
//   int64[D] document indices: document d is sequences [idx[d], idx[d+1])
//   int8[S]  sequence modes (optional; only multimodal Megatron files)
//
// Files written here have one sequence per document (document indices
// 0, 1, ..., S), so "sequence i" and "document i" are the same thing; files from
// Megatron's own tools with several sequences per document read fine too.
//
// The one non-obvious rule: the reader trusts nothing. Opening validates the
// whole index against both file sizes (O(S), a few ms per million documents)
// and throws meshloom::Error with one message naming the file, so that later
// accesses need no checks and a corrupt file never becomes a crash mid-run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace meshloom::data {

// Megatron's dtype codes; the values are part of the file format.
enum class TokenDtype : uint8_t {
  kUint8 = 1,
  kInt8 = 2,
  kInt16 = 3,
  kInt32 = 4,
  kInt64 = 5,
  kFloat64 = 6,
  kFloat32 = 7,
  kUint16 = 8,
};

size_t dtype_bytes(TokenDtype dtype);
const char* dtype_name(TokenDtype dtype);  // "uint16", ...; "code N" if unknown
// The smallest dtype the writer supports that holds every id in [0, vocab_size):
// uint16 when vocab_size <= 65536, else int32.
TokenDtype dtype_for_vocab(int64_t vocab_size);

// The file names for a prefix.
inline std::string bin_path(const std::string& prefix) { return prefix + ".bin"; }
inline std::string idx_path(const std::string& prefix) { return prefix + ".idx"; }

// Streaming writer: add documents one at a time, then finalize(). Tokens go to
// PREFIX.bin.tmp as they come (only 4 bytes per document stay in memory);
// finalize() writes the index and renames both files into place, so a crash or
// an exception never leaves a PREFIX.bin/.idx pair that looks complete. If the
// writer dies unfinalized, the temporary files are removed.
class IndexedDatasetWriter {
 public:
  // dtype: kUint8, kUint16, kInt32 or kInt64. Throws Error if PREFIX.bin.tmp
  // cannot be created.
  IndexedDatasetWriter(std::string prefix, TokenDtype dtype);
  ~IndexedDatasetWriter();
  IndexedDatasetWriter(const IndexedDatasetWriter&) = delete;
  IndexedDatasetWriter& operator=(const IndexedDatasetWriter&) = delete;

  // Appends one document (one sequence). Throws Error if a token is negative or
  // does not fit the dtype, or the document has more than 2^31-1 tokens.
  void add_document(std::span<const int32_t> tokens);
  // Writes PREFIX.idx and moves both files into place. Call once.
  void finalize();

  uint64_t num_documents() const { return lengths_.size(); }
  uint64_t num_tokens() const { return tokens_; }
  uint64_t bin_bytes() const { return tokens_ * item_bytes_; }
  const std::string& prefix() const { return prefix_; }

 private:
  void flush();

  std::string prefix_;
  TokenDtype dtype_;
  size_t item_bytes_;
  int fd_ = -1;
  bool finalized_ = false;
  std::vector<char> buffer_;
  std::vector<int32_t> lengths_;
  uint64_t tokens_ = 0;
};

// A read-only view of one sequence's tokens inside the mapped .bin.
struct TokenView {
  const std::byte* data = nullptr;
  size_t size = 0;  // tokens
  TokenDtype dtype = TokenDtype::kUint16;

  int64_t operator[](size_t k) const;
  // Appends the tokens to *out (int64 values outside int32 throw Error).
  void append_to(std::vector<int32_t>* out) const;
  // Appends tokens [offset, offset + n) (which must lie inside the view).
  void append_range(size_t offset, size_t n, std::vector<int32_t>* out) const;
  std::vector<int32_t> to_vector() const;
};

// Memory-mapped reader. O(1) access to any sequence; nothing is copied.
class IndexedDataset {
 public:
  // Maps and validates PREFIX.idx and PREFIX.bin; throws Error naming the file
  // on any problem (missing, wrong magic, unsupported version or dtype,
  // truncated, counts that do not match the size, pointers or lengths past the
  // end of .bin, non-monotone pointers, bad document indices).
  explicit IndexedDataset(const std::string& prefix);
  ~IndexedDataset();
  IndexedDataset(IndexedDataset&& other) noexcept;
  IndexedDataset& operator=(IndexedDataset&& other) noexcept;
  IndexedDataset(const IndexedDataset&) = delete;
  IndexedDataset& operator=(const IndexedDataset&) = delete;

  const std::string& prefix() const { return prefix_; }
  TokenDtype dtype() const { return dtype_; }
  // Number of sequences (= documents for files written by IndexedDatasetWriter).
  size_t size() const { return sequences_; }
  // Number of documents (document indices minus one).
  size_t num_documents() const { return documents_; }
  uint64_t num_tokens() const { return tokens_; }

  int32_t length(size_t i) const;    // tokens in sequence i
  int64_t pointer(size_t i) const;   // byte offset of sequence i in .bin
  TokenView tokens(size_t i) const;  // sequence i
  // Document d's sequences: [first, last).
  std::pair<size_t, size_t> document_sequences(size_t d) const;

 private:
  void unmap();

  std::string prefix_;
  TokenDtype dtype_ = TokenDtype::kUint16;
  size_t sequences_ = 0;
  size_t documents_ = 0;
  uint64_t tokens_ = 0;
  const std::byte* idx_ = nullptr;  // mapped .idx
  size_t idx_size_ = 0;
  const std::byte* bin_ = nullptr;  // mapped .bin (null when empty)
  size_t bin_size_ = 0;
};

// Reads only PREFIX.idx (validated as above, minus the .bin checks) and returns
// each document's length in tokens (the sum of its sequences' lengths). This is
// what planners and the data plane need, without touching the token data.
std::vector<int64_t> read_document_lengths(const std::string& prefix);

}  // namespace meshloom::data
