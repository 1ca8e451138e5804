// An image as the model sees it: p x p x 3 patches. This is the model's input
// function, exactly:
//
//   1. decode to 8-bit RGB (decode.hpp: alpha composited on black)
//   2. resize to fit_size(size, max_side) with PIL's bilinear filter
//      (resize.hpp); an image that fits is not resized
//   3. pad right and bottom to multiples of p; padding is 0.0 in the output
//      (the normalized mid-grey), not a pixel value
//   4. patch (r, c) of the rows x cols grid, rows = ceil(h / p),
//      cols = ceil(w / p), in raster order (r major); inside a patch the
//      values run over pixel rows y, then columns x, then R, G, B:
//        values[((r * cols + c) * p * p + y * p + x) * 3 + ch]
//          = v / 127.5f - 1.0f  for the pixel (r * p + y, c * p + x), v in 0..255
//          = 0.0f               where that pixel is padding
//      (v / 255 * 2 - 1, so -1 is black and +1 white.)
//
// A sample's length in tokens counts one per patch; patch_count() gives it from
// the image's size alone (image_size() reads it from the header).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "image/decode.hpp"

namespace meshloom::image {

// A pixel's value in a patch (step 4): v / 255 * 2 - 1, computed only here.
inline float pixel_value(uint8_t v) { return float(v) / 127.5f - 1.0f; }

struct ImageOptions {
  int max_side = 512;                // data.image.max_side
  int patch = 16;                    // data.image.patch
  uint64_t max_pixels = 64'000'000;  // data.image.max_pixels: larger images are refused
};

struct Patches {
  int rows = 0;  // patch grid
  int cols = 0;
  int patch = 0;              // p
  std::vector<float> values;  // rows * cols * p * p * 3, layout above
  int64_t count() const { return int64_t(rows) * cols; }
  size_t values_per_patch() const { return size_t(patch) * patch * 3; }
};

// ceil(side / p) for both sides.
struct PatchGrid {
  int rows = 0;
  int cols = 0;
};
PatchGrid patch_grid(ImageSize size, int patch);

// Patches of an image of this (original, undecoded) size once resized.
int64_t patch_count(ImageSize original, const ImageOptions& options);

// Steps 3 and 4 on an image already resized.
Patches cut_patches(const RgbImage& image, int patch);

// Steps 1 and 2: the decoded image, resized to fit. Throws ImageError.
RgbImage decode_fitted(std::string_view bytes, const ImageOptions& options);

// Steps 1 to 4. Throws ImageError (decode_image()).
Patches image_to_patches(std::string_view bytes, const ImageOptions& options);

}  // namespace meshloom::image
