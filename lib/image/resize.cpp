#include "image/resize.hpp"

#include <algorithm>
#include <cmath>

namespace meshloom::image {
namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;  // PIL's: room for the sum of 8-bit products

// One output pixel's weights over the input pixels first .. first + size - 1.
struct Taps {
  int first = 0;
  std::vector<int32_t> weights;
};

double triangle(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

std::vector<Taps> bilinear_taps(int in_size, int out_size) {
  const double scale = double(in_size) / out_size;
  const double filter_scale = std::max(scale, 1.0);  // stretch only when shrinking
  const double support = 1.0 * filter_scale;         // the triangle's support is 1
  const double inv_filter_scale = 1.0 / filter_scale;
  std::vector<Taps> taps(out_size);
  std::vector<double> w;
  for (int x = 0; x < out_size; ++x) {
    const double center = (x + 0.5) * scale;
    const int lo = std::max(0, int(center - support + 0.5));
    const int hi = std::min(in_size, int(center + support + 0.5));
    w.assign(std::max(0, hi - lo), 0.0);
    double sum = 0.0;
    for (int i = lo; i < hi; ++i) {
      w[i - lo] = triangle((i - center + 0.5) * inv_filter_scale);
      sum += w[i - lo];
    }
    taps[x].first = lo;
    taps[x].weights.resize(w.size());
    for (size_t i = 0; i < w.size(); ++i) {
      const double k = (sum != 0.0 ? w[i] / sum : w[i]) * (1 << kPrecisionBits);
      taps[x].weights[i] = int32_t(k < 0 ? k - 0.5 : k + 0.5);
    }
  }
  return taps;
}

uint8_t round_clamp(int64_t sum) {
  return uint8_t(std::clamp<int64_t>(sum >> kPrecisionBits, 0, 255));
}

RgbImage resize_horizontal(const RgbImage& in, int width) {
  const std::vector<Taps> taps = bilinear_taps(in.size.width, width);
  RgbImage out{{width, in.size.height}, std::vector<uint8_t>(size_t(width) * in.size.height * 3)};
  for (int y = 0; y < in.size.height; ++y)
    for (int x = 0; x < width; ++x)
      for (int c = 0; c < 3; ++c) {
        int64_t sum = int64_t{1} << (kPrecisionBits - 1);  // rounds the shift below
        const Taps& t = taps[x];
        for (size_t i = 0; i < t.weights.size(); ++i)
          sum += int64_t(in.at(t.first + int(i), y)[c]) * t.weights[i];
        out.pixels[(size_t(y) * width + x) * 3 + c] = round_clamp(sum);
      }
  return out;
}

RgbImage resize_vertical(const RgbImage& in, int height) {
  const std::vector<Taps> taps = bilinear_taps(in.size.height, height);
  const int width = in.size.width;
  RgbImage out{{width, height}, std::vector<uint8_t>(size_t(width) * height * 3)};
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      for (int c = 0; c < 3; ++c) {
        int64_t sum = int64_t{1} << (kPrecisionBits - 1);
        const Taps& t = taps[y];
        for (size_t i = 0; i < t.weights.size(); ++i)
          sum += int64_t(in.at(x, t.first + int(i))[c]) * t.weights[i];
        out.pixels[(size_t(y) * width + x) * 3 + c] = round_clamp(sum);
      }
  return out;
}

}  // namespace

ImageSize fit_size(ImageSize size, int max_side) {
  ML_CHECK(max_side > 0, "max_side must be positive");
  const int long_side = std::max(size.width, size.height);
  if (long_side <= max_side) return size;
  const auto shrink = [&](int side) {
    return int(std::max<int64_t>(1, (int64_t(side) * max_side + long_side / 2) / long_side));
  };
  return {shrink(size.width), shrink(size.height)};
}

RgbImage resize_bilinear(const RgbImage& in, ImageSize size) {
  ML_CHECK(size.width > 0 && size.height > 0, "resize to an empty image");
  // As PIL: a pass whose side does not change is skipped (it would copy).
  RgbImage out = in.size.width != size.width ? resize_horizontal(in, size.width) : in;
  if (out.size.height != size.height) out = resize_vertical(out, size.height);
  return out;
}

}  // namespace meshloom::image
