// The safetensors format (Hugging Face checkpoints) and its sharded layout.
//
// A .safetensors file is: an 8-byte little-endian header size N, N bytes of
// JSON, then the data buffer. The JSON maps each tensor name to
//   {"dtype": "F32"|"F16"|"BF16"|..., "shape": [...], "data_offsets": [b, e]}
// with [b, e) relative to the start of the buffer, plus an optional
// "__metadata__" object of string values. A sharded checkpoint is a folder
// with model.safetensors.index.json, whose "weight_map" maps each tensor to
// the shard file (in the same folder) that holds it.
//
// Files are memory-mapped and read as float (F32, F16 and BF16; a file with
// another dtype is refused when opened). Every bad input is one meshloom::Error
// naming the file and the tensor or key.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace meshloom::data {

enum class StDtype { F32, F16, BF16 };

// The format's name of a dtype ("F32", ...).
const char* st_dtype_name(StDtype dtype);
size_t st_dtype_size(StDtype dtype);

struct StTensor {
  std::string name;
  StDtype dtype = StDtype::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offsets into the data buffer
  uint64_t end = 0;
  int64_t numel() const;
};

// Largest header accepted (as the reference implementation: 100 MB).
constexpr uint64_t kMaxSafetensorsHeader = 100'000'000;

// Parses and checks a whole file's bytes (header and buffer), without
// mapping: the tensors sorted by name, and the metadata. `path` is only
// named in errors. Pure, for the fuzz target.
struct StHeader {
  std::vector<StTensor> tensors;
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;  // file offset of the buffer (8 + N)
};
StHeader parse_safetensors(const std::string& path, std::string_view bytes);

// One mapped .safetensors file.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::vector<StTensor>& tensors() const { return header_.tensors; }
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }
  // nullptr when absent.
  const StTensor* find(const std::string& name) const;
  // The tensor's bytes as stored (little-endian).
  std::string_view raw(const StTensor& t) const;
  // The tensor as float; throws naming the file and tensor if it is absent.
  std::vector<float> read(const std::string& name) const;
  // Its flat elements [first, first + n) as float: only their pages are read.
  void read_range(const std::string& name, int64_t first, int64_t n, float* out) const;

 private:
  std::string path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
  StHeader header_;
};

// A checkpoint: one .safetensors file, or a folder holding either
// model.safetensors.index.json (sharded) or model.safetensors.
class SafetensorsCheckpoint {
 public:
  explicit SafetensorsCheckpoint(const std::string& path);
  ~SafetensorsCheckpoint();

  // Every tensor name, sorted.
  std::vector<std::string> names() const;
  // nullptr when absent.
  const StTensor* find(const std::string& name) const;
  // The file that holds `name` (the index names it in errors).
  const std::string& file_of(const std::string& name) const;
  std::vector<float> read(const std::string& name) const;
  void read_range(const std::string& name, int64_t first, int64_t n, float* out) const;

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsFile*> where_;
  std::string path_;
};

// One tensor to write: `data` holds numel(shape) floats.
struct StWriteTensor {
  std::string name;
  std::vector<int64_t> shape;
  const float* data = nullptr;
};

// Writes a .safetensors file (F32 or BF16, rounded to nearest even), tensors
// in the given order, header padded to 8 bytes; throws meshloom::Error
// naming the file when it cannot be written.
void write_safetensors(const std::string& path, const std::vector<StWriteTensor>& tensors,
                       StDtype dtype, const std::map<std::string, std::string>& metadata = {});

// Element conversions (exact for F16 and BF16 to float).
float bf16_to_float(uint16_t bits);
float f16_to_float(uint16_t bits);
uint16_t float_to_bf16(float value);

}  // namespace meshloom::data
