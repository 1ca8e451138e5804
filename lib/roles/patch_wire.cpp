#include "roles/patch_wire.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "image/patches.hpp"

namespace meshloom::proto {
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

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

// The pixel whose value is exactly x, or -1.
int pixel_of(float x) {
  if (!(x >= -1.0f && x <= 1.0f)) return -1;  // NaN too
  const long v = std::lround((double(x) + 1.0) * 127.5);
  return same_bits(pixel_values()[size_t(v)], x) ? int(v) : -1;
}

}  // namespace

void put_patches(ByteWriter& w, const std::vector<float>& values) {
  std::vector<uint8_t> pixels(values.size(), 0);
  std::vector<uint64_t> runs;  // begin, end of each run of padding
  for (size_t i = 0; i < values.size(); ++i) {
    if (same_bits(values[i], 0.0f)) {
      if (!runs.empty() && runs.back() == i) {
        runs.back() = i + 1;
      } else {
        runs.push_back(i);
        runs.push_back(i + 1);
      }
      continue;
    }
    const int v = pixel_of(values[i]);
    if (v < 0) {
      w.put(kRaw);
      w.put_vector(values);
      return;
    }
    pixels[i] = uint8_t(v);
  }
  w.put(kPixels);
  w.put_vector(pixels);
  w.put_varint(runs.size() / 2);
  uint64_t end = 0;
  for (size_t k = 0; k < runs.size(); k += 2) {
    w.put_varint(runs[k] - end);
    w.put_varint(runs[k + 1] - runs[k]);
    end = runs[k + 1];
  }
}

std::vector<float> get_patches(ByteReader& r) {
  const auto format = r.get<uint8_t>();
  if (format == kRaw) return r.get_vector<float>();
  if (format != kPixels) r.fail_corrupt("patches in format " + std::to_string(format));
  const std::vector<uint8_t> pixels = r.get_vector<uint8_t>();
  std::vector<float> values(pixels.size());
  for (size_t i = 0; i < pixels.size(); ++i) values[i] = pixel_values()[pixels[i]];
  const uint64_t n = pixels.size(), count = r.get_varint();
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

}  // namespace meshloom::proto
