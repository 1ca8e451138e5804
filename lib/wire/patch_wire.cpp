#include "wire/patch_wire.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <string>
#include <utility>

#include "image/patches.hpp"

namespace meshloom::wire {
namespace {

constexpr uint8_t kRaw = 0, kPixels = 1;

const std::array<float, 256>& pixel_values() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int v = 0; v < 256; ++v) t[size_t(v)] = image::pixel_value(uint8_t(v));
    return t;
  }();
  return table;
}

uint32_t bits_of(float x) { return std::bit_cast<uint32_t>(x); }

// The pixel whose value is exactly x (bit for bit), or -1. The rounding
// only guesses; the table decides.
int pixel_of(float x, const std::array<float, 256>& table) {
  const float y = (x + 1.0f) * 127.5f + 0.5f;
  if (!(y >= 0.0f && y < 256.0f)) return -1;  // NaN too
  const int v = int(y);
  return bits_of(table[size_t(v)]) == bits_of(x) ? v : -1;
}

}  // namespace

void put_patches(ByteWriter& w, const std::vector<float>& values) {
  std::string& out = w.bytes();
  const size_t at = out.size(), n = values.size();
  w.put(kPixels);
  w.put(uint64_t(n));
  out.resize(out.size() + n);  // zeros: what padding leaves
  auto* pixels = reinterpret_cast<uint8_t*>(out.data() + out.size() - n);
  const std::array<float, 256>& table = pixel_values();
  std::vector<std::pair<uint64_t, uint64_t>> runs;  // [begin, end) of padding
  for (size_t i = 0; i < n; ++i) {
    const float x = values[i];
    if (bits_of(x) == 0) {  // +0.0: padding
      if (!runs.empty() && runs.back().second == i)
        ++runs.back().second;
      else
        runs.emplace_back(i, i + 1);
      continue;
    }
    const int v = pixel_of(x, table);
    if (v < 0) {  // not a pixel: the whole list as float32
      out.resize(at);
      w.put(kRaw);
      w.put_vector(values);
      return;
    }
    pixels[i] = uint8_t(v);
  }
  w.put_varint(runs.size());
  uint64_t end = 0;
  for (const auto& [begin, run_end] : runs) {
    w.put_varint(begin - end);
    w.put_varint(run_end - begin);
    end = run_end;
  }
}

std::vector<float> get_patches(ByteReader& r) {
  const auto format = r.get<uint8_t>();
  if (format == kRaw) return r.get_vector<float>();
  if (format != kPixels) r.fail_corrupt("patches in format " + std::to_string(format));
  const uint64_t n = r.get_count(1);
  const auto* pixels = reinterpret_cast<const uint8_t*>(r.get_view(n).data());
  const std::array<float, 256>& table = pixel_values();
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = table[pixels[i]];
  const uint64_t count = r.get_varint();
  uint64_t end = 0;
  for (uint64_t k = 0; k < count; ++k) {
    const uint64_t gap = r.get_varint(), length = r.get_varint();
    if (length == 0 || gap > n - end || length > n - end - gap)
      r.fail_corrupt("a run of padding outside the " + std::to_string(n) + " patch values");
    std::fill(values.begin() + int64_t(end + gap), values.begin() + int64_t(end + gap + length),
              0.0f);
    end += gap + length;
  }
  return values;
}

}  // namespace meshloom::wire
