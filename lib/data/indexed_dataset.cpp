// Megatron-LM indexed datasets: the streaming writer, the validating
// memory-mapped reader and the index-only length reader.
#include "data/indexed_dataset.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include "base/check.hpp"
#include "base/strings.hpp"
#include "data/mapped_file.hpp"

namespace meshloom::data {

static_assert(std::endian::native == std::endian::little,
              "the .bin/.idx formats are little-endian; a big-endian host needs byte swaps");

namespace {

constexpr char kMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
constexpr uint64_t kVersion = 1;
constexpr size_t kHeaderBytes = 9 + 8 + 1 + 8 + 8;  // 34
static_assert(kHeaderBytes == 34);
constexpr size_t kWriteBuffer = 1 << 20;

std::string errno_text(int err) { return std::strerror(err); }

[[noreturn]] void file_error(const std::string& path, const std::string& what) {
  throw Error(path + ": " + what);
}

// Unaligned little-endian loads from the mapped index (its arrays start at byte
// 34, so they are not naturally aligned).
template <typename T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

bool dtype_known(uint8_t code) { return code >= 1 && code <= 8; }

// The parsed, validated .idx layout.
struct IndexLayout {
  TokenDtype dtype = TokenDtype::kUint16;
  uint64_t sequences = 0;
  uint64_t doc_indices = 0;  // documents + 1
  const std::byte* lengths = nullptr;
  const std::byte* pointers = nullptr;
  const std::byte* documents = nullptr;

  int32_t length(size_t i) const { return load<int32_t>(lengths + 4 * i); }
  int64_t pointer(size_t i) const { return load<int64_t>(pointers + 8 * i); }
  int64_t doc_index(size_t d) const { return load<int64_t>(documents + 8 * d); }
};

// Validates the header, the counts against the file size, the lengths, the
// pointers' order and alignment, and the document indices. Everything except
// the bounds against .bin (see check_against_bin).
IndexLayout parse_index(const std::string& path, const std::byte* data, size_t size) {
  const size_t magic_bytes = std::min(size, sizeof(kMagic));
  if (magic_bytes > 0 && std::memcmp(data, kMagic, magic_bytes) != 0)
    file_error(path,
               "wrong magic: not a Megatron indexed dataset index (expected \"MMIDIDX\\0\\0\")");
  if (size < kHeaderBytes)
    file_error(path,
               strf("truncated: %zu bytes, but the header alone needs %zu", size, kHeaderBytes));

  const uint64_t version = load<uint64_t>(data + 9);
  if (version != kVersion)
    file_error(path, strf("unsupported version %llu (only version 1 exists)",
                          static_cast<unsigned long long>(version)));
  const uint8_t code = load<uint8_t>(data + 17);
  if (!dtype_known(code)) file_error(path, strf("unsupported dtype code %u (known: 1..8)", code));
  IndexLayout layout;
  layout.dtype = static_cast<TokenDtype>(code);
  if (layout.dtype == TokenDtype::kFloat32 || layout.dtype == TokenDtype::kFloat64)
    file_error(path, strf("unsupported dtype %s (code %u): token ids must be integers",
                          dtype_name(layout.dtype), code));
  layout.sequences = load<uint64_t>(data + 18);
  layout.doc_indices = load<uint64_t>(data + 26);
  const uint64_t s = layout.sequences, d = layout.doc_indices;

  // Expected size: header + 4 S + 8 S + 8 D, plus S bytes of optional modes.
  // Counts too large for the file are caught before any multiplication overflows.
  const uint64_t body = size - kHeaderBytes;
  if (s > body / 12 || d > body / 8 || 12 * s + 8 * d > body) {
    const bool huge = s >= (uint64_t{1} << 58) || d >= (uint64_t{1} << 58);
    const std::string need_text =
        huge ? std::string("more than 2^61")
             : strf("%llu", static_cast<unsigned long long>(kHeaderBytes + 12 * s + 8 * d));
    file_error(path, strf("truncated: the header says %llu sequences and %llu document indices, "
                          "which need %s bytes, but the file has %zu",
                          static_cast<unsigned long long>(s), static_cast<unsigned long long>(d),
                          need_text.c_str(), size));
  }
  const uint64_t need = kHeaderBytes + 12 * s + 8 * d;
  if (size != need && size != need + s)
    file_error(path, strf("counts do not match the file size: %llu sequences and %llu document "
                          "indices need %llu bytes (or %llu with sequence modes), the file has %zu",
                          static_cast<unsigned long long>(s), static_cast<unsigned long long>(d),
                          static_cast<unsigned long long>(need),
                          static_cast<unsigned long long>(need + s), size));
  if (d == 0) file_error(path, "no document indices: there must be at least one (the leading 0)");

  layout.lengths = data + kHeaderBytes;
  layout.pointers = layout.lengths + 4 * s;
  layout.documents = layout.pointers + 8 * s;

  const size_t item = dtype_bytes(layout.dtype);
  int64_t prev_end = 0;
  for (size_t i = 0; i < s; ++i) {
    const int32_t len = layout.length(i);
    if (len < 0) file_error(path, strf("sequence %zu has a negative length (%d)", i, len));
    const int64_t ptr = layout.pointer(i);
    if (ptr < 0)
      file_error(
          path, strf("sequence %zu has a negative pointer (%lld)", i, static_cast<long long>(ptr)));
    if (i > 0 && ptr < layout.pointer(i - 1))
      file_error(path, strf("pointers are not monotone: sequence %zu starts at byte %lld, before "
                            "sequence %zu at byte %lld",
                            i, static_cast<long long>(ptr), i - 1,
                            static_cast<long long>(layout.pointer(i - 1))));
    if (ptr < prev_end)
      file_error(path,
                 strf("sequence %zu starts at byte %lld, inside sequence %zu (which ends at "
                      "byte %lld)",
                      i, static_cast<long long>(ptr), i - 1, static_cast<long long>(prev_end)));
    if (static_cast<uint64_t>(ptr) % item != 0)
      file_error(path, strf("sequence %zu starts at byte %lld, not a multiple of the %s size (%zu)",
                            i, static_cast<long long>(ptr), dtype_name(layout.dtype), item));
    const int64_t bytes = static_cast<int64_t>(len) * static_cast<int64_t>(item);
    if (ptr > std::numeric_limits<int64_t>::max() - bytes)  // ptr + bytes would overflow
      file_error(path, strf("sequence %zu starts at byte %lld and ends past 2^63 bytes", i,
                            static_cast<long long>(ptr)));
    prev_end = ptr + bytes;
  }

  if (layout.doc_index(0) != 0)
    file_error(path, strf("document index 0 is %lld, must be 0",
                          static_cast<long long>(layout.doc_index(0))));
  for (size_t k = 1; k < d; ++k) {
    const int64_t a = layout.doc_index(k - 1), b = layout.doc_index(k);
    if (b < a || b > static_cast<int64_t>(s))
      file_error(path, strf("document index %zu is %lld after %lld: document indices must not "
                            "decrease and must stay within 0..%llu",
                            k, static_cast<long long>(b), static_cast<long long>(a),
                            static_cast<unsigned long long>(s)));
  }
  if (layout.doc_index(d - 1) != static_cast<int64_t>(s))
    file_error(path, strf("the last document index is %lld, must equal the sequence count %llu",
                          static_cast<long long>(layout.doc_index(d - 1)),
                          static_cast<unsigned long long>(s)));
  return layout;
}

// Every sequence must lie inside .bin.
void check_against_bin(const std::string& idx, const std::string& bin, const IndexLayout& layout,
                       size_t bin_size) {
  const size_t item = dtype_bytes(layout.dtype);
  for (size_t i = 0; i < layout.sequences; ++i) {
    const uint64_t start = static_cast<uint64_t>(layout.pointer(i));
    const uint64_t end = start + static_cast<uint64_t>(layout.length(i)) * item;
    if (end > bin_size)
      file_error(idx, strf("sequence %zu (bytes %llu..%llu) runs past the end of %s (%zu bytes)", i,
                           static_cast<unsigned long long>(start),
                           static_cast<unsigned long long>(end), bin.c_str(), bin_size));
  }
}

void write_all(int fd, const char* data, size_t n, const std::string& path) {
  while (n > 0) {
    ssize_t w = ::write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw Error("cannot write " + path + ": " + errno_text(errno));
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace

size_t dtype_bytes(TokenDtype dtype) {
  switch (dtype) {
    case TokenDtype::kUint8:
    case TokenDtype::kInt8:
      return 1;
    case TokenDtype::kInt16:
    case TokenDtype::kUint16:
      return 2;
    case TokenDtype::kInt32:
    case TokenDtype::kFloat32:
      return 4;
    case TokenDtype::kInt64:
    case TokenDtype::kFloat64:
      return 8;
  }
  return 0;
}

const char* dtype_name(TokenDtype dtype) {
  switch (dtype) {
    case TokenDtype::kUint8:
      return "uint8";
    case TokenDtype::kInt8:
      return "int8";
    case TokenDtype::kInt16:
      return "int16";
    case TokenDtype::kInt32:
      return "int32";
    case TokenDtype::kInt64:
      return "int64";
    case TokenDtype::kFloat64:
      return "float64";
    case TokenDtype::kFloat32:
      return "float32";
    case TokenDtype::kUint16:
      return "uint16";
  }
  return "unknown";
}

TokenDtype dtype_for_vocab(int64_t vocab_size) {
  return vocab_size <= 65536 ? TokenDtype::kUint16 : TokenDtype::kInt32;
}

// ---------------------------------------------------------------- writer

IndexedDatasetWriter::IndexedDatasetWriter(std::string prefix, TokenDtype dtype)
    : prefix_(std::move(prefix)), dtype_(dtype), item_bytes_(dtype_bytes(dtype)) {
  if (dtype != TokenDtype::kUint8 && dtype != TokenDtype::kUint16 && dtype != TokenDtype::kInt32 &&
      dtype != TokenDtype::kInt64)
    throw Error(strf("IndexedDatasetWriter: cannot write dtype %s (uint8, uint16, int32, int64)",
                     dtype_name(dtype)));
  const std::string tmp = bin_path(prefix_) + ".tmp";
  fd_ = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error("cannot create " + tmp + ": " + errno_text(errno));
  buffer_.reserve(kWriteBuffer);
}

IndexedDatasetWriter::~IndexedDatasetWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!finalized_) {
    ::unlink((bin_path(prefix_) + ".tmp").c_str());
    ::unlink((idx_path(prefix_) + ".tmp").c_str());
  }
}

void IndexedDatasetWriter::flush() {
  write_all(fd_, buffer_.data(), buffer_.size(), bin_path(prefix_) + ".tmp");
  buffer_.clear();
}

namespace {

template <typename T>
void append_tokens(std::span<const int32_t> tokens, int64_t max_id, TokenDtype dtype,
                   const std::string& prefix, std::vector<char>* buffer) {
  const size_t old = buffer->size();
  buffer->resize(old + tokens.size() * sizeof(T));
  char* out = buffer->data() + old;
  for (size_t k = 0; k < tokens.size(); ++k) {
    const int32_t t = tokens[k];
    if (t < 0 || t > max_id) {
      buffer->resize(old);
      throw Error(strf("%s: token %d (document position %zu) does not fit dtype %s", prefix.c_str(),
                       t, k, dtype_name(dtype)));
    }
    const T v = static_cast<T>(t);
    std::memcpy(out + k * sizeof(T), &v, sizeof(T));
  }
}

}  // namespace

void IndexedDatasetWriter::add_document(std::span<const int32_t> tokens) {
  ML_CHECK(!finalized_, "add_document after finalize");
  if (tokens.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    throw Error(strf("%s: a document of %zu tokens exceeds the format's int32 length limit",
                     prefix_.c_str(), tokens.size()));
  switch (dtype_) {
    case TokenDtype::kUint8:
      append_tokens<uint8_t>(tokens, 255, dtype_, prefix_, &buffer_);
      break;
    case TokenDtype::kUint16:
      append_tokens<uint16_t>(tokens, 65535, dtype_, prefix_, &buffer_);
      break;
    case TokenDtype::kInt32:
      append_tokens<int32_t>(tokens, std::numeric_limits<int32_t>::max(), dtype_, prefix_,
                             &buffer_);
      break;
    default:
      append_tokens<int64_t>(tokens, std::numeric_limits<int32_t>::max(), dtype_, prefix_,
                             &buffer_);
      break;
  }
  lengths_.push_back(static_cast<int32_t>(tokens.size()));
  tokens_ += tokens.size();
  if (buffer_.size() >= kWriteBuffer) flush();
}

void IndexedDatasetWriter::finalize() {
  ML_CHECK(!finalized_, "finalize called twice");
  flush();
  const std::string bin_tmp = bin_path(prefix_) + ".tmp";
  if (::close(fd_) != 0) {
    fd_ = -1;
    throw Error("cannot write " + bin_tmp + ": " + errno_text(errno));
  }
  fd_ = -1;

  // The index: header, lengths, pointers, document indices 0..S.
  const uint64_t s = lengths_.size();
  std::vector<char> idx;
  idx.reserve(kHeaderBytes + 12 * s + 8 * (s + 1));
  auto put = [&idx](const void* p, size_t n) {
    idx.insert(idx.end(), static_cast<const char*>(p), static_cast<const char*>(p) + n);
  };
  put(kMagic, sizeof(kMagic));
  put(&kVersion, 8);
  const uint8_t code = static_cast<uint8_t>(dtype_);
  put(&code, 1);
  put(&s, 8);
  const uint64_t d = s + 1;
  put(&d, 8);
  put(lengths_.data(), 4 * s);
  int64_t ptr = 0;
  for (int32_t len : lengths_) {
    put(&ptr, 8);
    ptr += static_cast<int64_t>(len) * static_cast<int64_t>(item_bytes_);
  }
  for (int64_t k = 0; k <= static_cast<int64_t>(s); ++k) put(&k, 8);

  const std::string idx_tmp = idx_path(prefix_) + ".tmp";
  int fd = ::open(idx_tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("cannot create " + idx_tmp + ": " + errno_text(errno));
  try {
    write_all(fd, idx.data(), idx.size(), idx_tmp);
  } catch (...) {
    ::close(fd);
    throw;
  }
  if (::close(fd) != 0) throw Error("cannot write " + idx_tmp + ": " + errno_text(errno));

  if (std::rename(bin_tmp.c_str(), bin_path(prefix_).c_str()) != 0)
    throw Error("cannot rename " + bin_tmp + ": " + errno_text(errno));
  if (std::rename(idx_tmp.c_str(), idx_path(prefix_).c_str()) != 0)
    throw Error("cannot rename " + idx_tmp + ": " + errno_text(errno));
  finalized_ = true;
}

// ---------------------------------------------------------------- token view

int64_t TokenView::operator[](size_t k) const {
  switch (dtype) {
    case TokenDtype::kUint8:
      return reinterpret_cast<const uint8_t*>(data)[k];
    case TokenDtype::kInt8:
      return reinterpret_cast<const int8_t*>(data)[k];
    case TokenDtype::kInt16:
      return reinterpret_cast<const int16_t*>(data)[k];
    case TokenDtype::kUint16:
      return reinterpret_cast<const uint16_t*>(data)[k];
    case TokenDtype::kInt32:
      return reinterpret_cast<const int32_t*>(data)[k];
    case TokenDtype::kInt64:
      return reinterpret_cast<const int64_t*>(data)[k];
    default:
      return 0;  // float dtypes are rejected when the dataset is opened
  }
}

void TokenView::append_to(std::vector<int32_t>* out) const { append_range(0, size, out); }

void TokenView::append_range(size_t offset, size_t n, std::vector<int32_t>* out) const {
  ML_CHECK(offset <= size && n <= size - offset,
           strf("token range [%zu, +%zu) outside a sequence of %zu", offset, n, size));
  out->reserve(out->size() + n);
  switch (dtype) {
    case TokenDtype::kUint16: {
      const uint16_t* p = reinterpret_cast<const uint16_t*>(data) + offset;
      out->insert(out->end(), p, p + n);
      return;
    }
    case TokenDtype::kInt32: {
      const int32_t* p = reinterpret_cast<const int32_t*>(data) + offset;
      out->insert(out->end(), p, p + n);
      return;
    }
    default:
      for (size_t k = offset; k < offset + n; ++k) {
        const int64_t v = (*this)[k];
        if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
          throw Error(strf("token %lld does not fit int32", static_cast<long long>(v)));
        out->push_back(static_cast<int32_t>(v));
      }
  }
}

std::vector<int32_t> TokenView::to_vector() const {
  std::vector<int32_t> out;
  append_to(&out);
  return out;
}

// ---------------------------------------------------------------- reader

IndexedDataset::IndexedDataset(const std::string& prefix) : prefix_(prefix) {
  const std::string idx = idx_path(prefix), bin = bin_path(prefix);
  MappingGuard idx_map{map_file(idx)};
  const IndexLayout layout = parse_index(idx, idx_map.m.data, idx_map.m.size);
  MappingGuard bin_map{map_file(bin)};
  check_against_bin(idx, bin, layout, bin_map.m.size);

  dtype_ = layout.dtype;
  sequences_ = layout.sequences;
  documents_ = layout.doc_indices - 1;
  for (size_t i = 0; i < sequences_; ++i) tokens_ += static_cast<uint64_t>(layout.length(i));
  const Mapping i = idx_map.release(), b = bin_map.release();
  idx_ = i.data;
  idx_size_ = i.size;
  bin_ = b.data;
  bin_size_ = b.size;
  watch_bin(bin, bin_, bin_size_);
}

IndexedDataset::~IndexedDataset() { unmap(); }

void IndexedDataset::unmap() {
  unwatch_bin(bin_);
  unmap_file(idx_, idx_size_);
  unmap_file(bin_, bin_size_);
  idx_ = bin_ = nullptr;
  idx_size_ = bin_size_ = 0;
}

IndexedDataset::IndexedDataset(IndexedDataset&& other) noexcept { *this = std::move(other); }

IndexedDataset& IndexedDataset::operator=(IndexedDataset&& other) noexcept {
  if (this != &other) {
    unmap();
    prefix_ = std::move(other.prefix_);
    dtype_ = other.dtype_;
    sequences_ = other.sequences_;
    documents_ = other.documents_;
    tokens_ = other.tokens_;
    idx_ = std::exchange(other.idx_, nullptr);
    idx_size_ = std::exchange(other.idx_size_, 0);
    bin_ = std::exchange(other.bin_, nullptr);
    bin_size_ = std::exchange(other.bin_size_, 0);
    other.sequences_ = other.documents_ = 0;
    other.tokens_ = 0;
  }
  return *this;
}

int32_t IndexedDataset::length(size_t i) const {
  ML_DCHECK(i < sequences_, "sequence index out of range");
  return load<int32_t>(idx_ + kHeaderBytes + 4 * i);
}

int64_t IndexedDataset::pointer(size_t i) const {
  ML_DCHECK(i < sequences_, "sequence index out of range");
  return load<int64_t>(idx_ + kHeaderBytes + 4 * sequences_ + 8 * i);
}

TokenView IndexedDataset::tokens(size_t i) const {
  ML_CHECK(i < sequences_, strf("sequence %zu of %zu in %s", i, sequences_, prefix_.c_str()));
  TokenView v;
  v.dtype = dtype_;
  v.size = static_cast<size_t>(length(i));
  v.data = v.size == 0 ? bin_ : bin_ + pointer(i);
  return v;
}

std::pair<size_t, size_t> IndexedDataset::document_sequences(size_t d) const {
  ML_CHECK(d < documents_, strf("document %zu of %zu in %s", d, documents_, prefix_.c_str()));
  const std::byte* docs = idx_ + kHeaderBytes + 12 * sequences_;
  return {static_cast<size_t>(load<int64_t>(docs + 8 * d)),
          static_cast<size_t>(load<int64_t>(docs + 8 * (d + 1)))};
}

std::vector<int64_t> read_document_lengths(const std::string& prefix) {
  const std::string idx = idx_path(prefix);
  MappingGuard map{map_file(idx)};
  const IndexLayout layout = parse_index(idx, map.m.data, map.m.size);
  const size_t docs = layout.doc_indices - 1;
  std::vector<int64_t> out(docs, 0);
  for (size_t d = 0; d < docs; ++d) {
    const size_t first = static_cast<size_t>(layout.doc_index(d));
    const size_t last = static_cast<size_t>(layout.doc_index(d + 1));
    int64_t sum = 0;
    for (size_t i = first; i < last; ++i) sum += layout.length(i);
    out[d] = sum;
  }
  return out;
}

}  // namespace meshloom::data
