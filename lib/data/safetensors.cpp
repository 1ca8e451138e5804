#include "data/safetensors.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "base/check.hpp"
#include "data/mapped_file.hpp"

namespace meshloom::data {

namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw Error(path + ": " + what);
}

bool parse_dtype(const std::string& s, StDtype* out) {
  if (s == "F32")
    *out = StDtype::F32;
  else if (s == "F16")
    *out = StDtype::F16;
  else if (s == "BF16")
    *out = StDtype::BF16;
  else
    return false;
  return true;
}

uint64_t read_u64_le(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | uint8_t(p[i]);
  return v;
}

// A JSON integer >= 0 that fits int64 (shape dims and offsets).
bool as_count(const json& j, uint64_t* out) {
  if (j.is_number_unsigned()) {
    *out = j.get<uint64_t>();
    return *out <= uint64_t(INT64_MAX);
  }
  if (j.is_number_integer() && j.get<int64_t>() >= 0) {
    *out = uint64_t(j.get<int64_t>());
    return true;
  }
  return false;
}

StTensor parse_entry(const std::string& path, const std::string& name, const json& e) {
  const std::string where = "tensor '" + name + "': ";
  if (!e.is_object()) bad(path, where + "entry is not an object");
  const auto dt = e.find("dtype");
  const auto sh = e.find("shape");
  const auto off = e.find("data_offsets");
  if (dt == e.end() || !dt->is_string()) bad(path, where + "no string \"dtype\"");
  if (sh == e.end() || !sh->is_array()) bad(path, where + "no array \"shape\"");
  if (off == e.end() || !off->is_array() || off->size() != 2)
    bad(path, where + "\"data_offsets\" is not [begin, end]");
  StTensor t;
  t.name = name;
  if (!parse_dtype(dt->get<std::string>(), &t.dtype))
    bad(path, where + "unsupported dtype '" + dt->get<std::string>() +
                  "' (meshloom reads F32, F16 and BF16)");
  // Bytes = product of dims x dtype size, checked against overflow.
  uint64_t bytes = st_dtype_size(t.dtype);
  for (const json& d : *sh) {
    uint64_t n = 0;
    if (!as_count(d, &n)) bad(path, where + "a \"shape\" dimension is not a count");
    t.shape.push_back(int64_t(n));
    if (__builtin_mul_overflow(bytes, n, &bytes) || bytes > uint64_t(INT64_MAX))
      bad(path, where + "shape too large");
  }
  if (!as_count((*off)[0], &t.begin) || !as_count((*off)[1], &t.end) || t.end < t.begin)
    bad(path, where + "\"data_offsets\" are not 0 <= begin <= end");
  if (t.end - t.begin != uint64_t(bytes))
    bad(path, where + "data_offsets span " + std::to_string(t.end - t.begin) +
                  " bytes but shape x dtype needs " + std::to_string(uint64_t(bytes)));
  return t;
}

void check_layout(const std::string& path, const StHeader& h, uint64_t buffer) {
  std::vector<const StTensor*> by_offset;
  for (const StTensor& t : h.tensors) {
    if (t.end > buffer)
      bad(path, "tensor '" + t.name + "': data_offsets end " + std::to_string(t.end) +
                    " is past the data buffer (" + std::to_string(buffer) +
                    " bytes): file truncated?");
    by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](const StTensor* a, const StTensor* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  for (size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i]->begin < by_offset[i - 1]->end)
      bad(path,
          "tensor '" + by_offset[i]->name + "' overlaps tensor '" + by_offset[i - 1]->name + "'");
}

}  // namespace

const char* st_dtype_name(StDtype dtype) {
  switch (dtype) {
    case StDtype::F32:
      return "F32";
    case StDtype::F16:
      return "F16";
    case StDtype::BF16:
      return "BF16";
  }
  ML_FAIL("bad StDtype");
}

size_t st_dtype_size(StDtype dtype) { return dtype == StDtype::F32 ? 4 : 2; }

int64_t StTensor::numel() const {
  int64_t n = 1;
  for (const int64_t d : shape) n *= d;
  return n;
}

StHeader parse_safetensors(const std::string& path, std::string_view bytes) {
  if (bytes.size() < 8)
    bad(path,
        "truncated: " + std::to_string(bytes.size()) + " bytes, less than the 8-byte header size");
  const uint64_t n = read_u64_le(bytes.data());
  if (n > kMaxSafetensorsHeader)
    bad(path, "header size " + std::to_string(n) + " is over the " +
                  std::to_string(kMaxSafetensorsHeader) + "-byte limit");
  if (n > bytes.size() - 8)
    bad(path, "truncated: header size " + std::to_string(n) + " but only " +
                  std::to_string(bytes.size() - 8) + " bytes follow");
  StHeader h;
  h.data_start = 8 + n;
  json j = json::parse(bytes.substr(8, n), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) bad(path, "header is not a JSON object");
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) bad(path, "\"__metadata__\" is not an object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) bad(path, "\"__metadata__\" key '" + m.key() + "' is not a string");
        h.metadata[m.key()] = m->get<std::string>();
      }
      continue;
    }
    h.tensors.push_back(parse_entry(path, it.key(), *it));
  }
  // nlohmann's object is a std::map: tensors come sorted by name.
  check_layout(path, h, bytes.size() - h.data_start);
  return h;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  MappingGuard guard{map_file(path)};
  header_ = parse_safetensors(
      path, std::string_view(reinterpret_cast<const char*>(guard.m.data), guard.m.size));
  const Mapping m = guard.release();
  data_ = m.data;
  size_ = m.size;
}

SafetensorsFile::~SafetensorsFile() { unmap_file(data_, size_); }

const StTensor* SafetensorsFile::find(const std::string& name) const {
  const auto it =
      std::lower_bound(header_.tensors.begin(), header_.tensors.end(), name,
                       [](const StTensor& t, const std::string& n) { return t.name < n; });
  return it != header_.tensors.end() && it->name == name ? &*it : nullptr;
}

std::string_view SafetensorsFile::raw(const StTensor& t) const {
  const char* base = reinterpret_cast<const char*>(data_) + header_.data_start;
  return {base + t.begin, size_t(t.end - t.begin)};
}

std::vector<float> SafetensorsFile::read(const std::string& name) const {
  const StTensor* t = find(name);
  if (!t) bad(path_, "no tensor '" + name + "'");
  std::vector<float> out(size_t(t->numel()));
  read_range(name, 0, t->numel(), out.data());
  return out;
}

void SafetensorsFile::read_range(const std::string& name, int64_t first, int64_t n,
                                 float* out) const {
  const StTensor* t = find(name);
  if (!t) bad(path_, "no tensor '" + name + "'");
  ML_CHECK(first >= 0 && n >= 0 && first + n <= t->numel(), "read_range outside the tensor");
  const std::string_view b = raw(*t);
  for (size_t i = 0; i < size_t(n); ++i) {
    const auto* p =
        reinterpret_cast<const uint8_t*>(b.data()) + (size_t(first) + i) * st_dtype_size(t->dtype);
    if (t->dtype == StDtype::F32) {
      const uint32_t u =
          uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
      out[i] = std::bit_cast<float>(u);
    } else {
      const uint16_t u = uint16_t(p[0] | p[1] << 8);
      out[i] = t->dtype == StDtype::BF16 ? bf16_to_float(u) : f16_to_float(u);
    }
  }
}

SafetensorsCheckpoint::SafetensorsCheckpoint(const std::string& path) : path_(path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    files_.push_back(std::make_unique<SafetensorsFile>(path));
  } else if (const std::string index = path + "/model.safetensors.index.json";
             fs::exists(index, ec)) {
    std::ifstream in(index);
    if (!in) bad(index, "cannot read");
    const json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) bad(index, "not a JSON object");
    const auto wm = j.find("weight_map");
    if (wm == j.end() || !wm->is_object()) bad(index, "no object \"weight_map\"");
    std::map<std::string, const SafetensorsFile*> shards;
    for (auto it = wm->begin(); it != wm->end(); ++it) {
      if (!it->is_string()) bad(index, "weight_map: tensor '" + it.key() + "' names no file");
      const std::string shard = it->get<std::string>();
      if (shard.empty() || shard.find('/') != std::string::npos || shard == "..")
        bad(index, "weight_map: tensor '" + it.key() + "': shard '" + shard +
                       "' is not a file name in the folder");
      if (!shards.count(shard)) {
        const std::string file = path + "/" + shard;
        if (!fs::exists(file, ec))
          bad(index, "weight_map: tensor '" + it.key() + "': shard file '" + file + "' is missing");
        files_.push_back(std::make_unique<SafetensorsFile>(file));
        shards[shard] = files_.back().get();
      }
      const SafetensorsFile* f = shards[shard];
      if (!f->find(it.key()))
        bad(index, "weight_map: tensor '" + it.key() + "' is not in its shard '" + f->path() + "'");
      where_[it.key()] = f;
    }
    return;
  } else if (fs::exists(path + "/model.safetensors", ec)) {
    files_.push_back(std::make_unique<SafetensorsFile>(path + "/model.safetensors"));
  } else {
    bad(path, "no model.safetensors.index.json or model.safetensors in the folder");
  }
  for (const StTensor& t : files_[0]->tensors()) where_[t.name] = files_[0].get();
}

SafetensorsCheckpoint::~SafetensorsCheckpoint() = default;

std::vector<std::string> SafetensorsCheckpoint::names() const {
  std::vector<std::string> out;
  for (const auto& [name, f] : where_) out.push_back(name);
  return out;
}

const StTensor* SafetensorsCheckpoint::find(const std::string& name) const {
  const auto it = where_.find(name);
  return it == where_.end() ? nullptr : it->second->find(name);
}

const std::string& SafetensorsCheckpoint::file_of(const std::string& name) const {
  const auto it = where_.find(name);
  if (it == where_.end()) bad(path_, "no tensor '" + name + "'");
  return it->second->path();
}

std::vector<float> SafetensorsCheckpoint::read(const std::string& name) const {
  const auto it = where_.find(name);
  if (it == where_.end()) bad(path_, "no tensor '" + name + "'");
  return it->second->read(name);
}

void SafetensorsCheckpoint::read_range(const std::string& name, int64_t first, int64_t n,
                                       float* out) const {
  const auto it = where_.find(name);
  if (it == where_.end()) bad(path_, "no tensor '" + name + "'");
  it->second->read_range(name, first, n, out);
}

void write_safetensors(const std::string& path, const std::vector<StWriteTensor>& tensors,
                       StDtype dtype, const std::map<std::string, std::string>& metadata) {
  ML_CHECK(dtype == StDtype::F32 || dtype == StDtype::BF16, "writes F32 or BF16 only");
  // ordered_json keeps the tensors in the order their data is written.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string buffer;
  for (const StWriteTensor& t : tensors) {
    int64_t n = 1;
    for (const int64_t d : t.shape) n *= d;
    const uint64_t begin = buffer.size();
    for (int64_t i = 0; i < n; ++i) {
      if (dtype == StDtype::F32) {
        const uint32_t u = std::bit_cast<uint32_t>(t.data[i]);
        for (int k = 0; k < 4; ++k) buffer.push_back(char(u >> (8 * k)));
      } else {
        const uint16_t u = float_to_bf16(t.data[i]);
        buffer.push_back(char(u));
        buffer.push_back(char(u >> 8));
      }
    }
    header[t.name] = {{"dtype", st_dtype_name(dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {begin, uint64_t(buffer.size())}}};
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the buffer starts 8-aligned
  std::string size(8, '\0');
  for (int k = 0; k < 8; ++k) size[k] = char(uint64_t(text.size()) >> (8 * k));
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << size << text << buffer;
  out.close();
  if (!out) bad(path, "cannot write");
}

float bf16_to_float(uint16_t bits) { return std::bit_cast<float>(uint32_t(bits) << 16); }

float f16_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t man = h & 0x3ff;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000 | man << 13;  // inf, NaN
  } else if (exp != 0) {
    bits = sign | (exp + 112) << 23 | man << 13;
  } else if (man == 0) {
    bits = sign;
  } else {
    // Subnormal: normalize the mantissa.
    exp = 113;
    while (!(man & 0x400)) {
      man <<= 1;
      --exp;
    }
    bits = sign | exp << 23 | (man & 0x3ff) << 13;
  }
  return std::bit_cast<float>(bits);
}

uint16_t float_to_bf16(float value) {
  const uint32_t u = std::bit_cast<uint32_t>(value);
  if ((u & 0x7fffffff) > 0x7f800000) return uint16_t((u >> 16) | 0x40);  // quiet NaN
  return uint16_t((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

}  // namespace meshloom::data
