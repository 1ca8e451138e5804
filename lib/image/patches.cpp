#include "image/patches.hpp"

#include "image/resize.hpp"

namespace meshloom::image {

PatchGrid patch_grid(ImageSize size, int patch) {
  ML_CHECK(patch > 0, "patch must be positive");
  return {(size.height + patch - 1) / patch, (size.width + patch - 1) / patch};
}

int64_t patch_count(ImageSize original, const ImageOptions& options) {
  const PatchGrid grid = patch_grid(fit_size(original, options.max_side), options.patch);
  return int64_t(grid.rows) * grid.cols;
}

Patches cut_patches(const RgbImage& image, int patch) {
  const PatchGrid grid = patch_grid(image.size, patch);
  Patches out{grid.rows, grid.cols, patch, {}};
  out.values.assign(size_t(out.count()) * out.values_per_patch(), 0.0f);  // 0.0: padding
  float* v = out.values.data();
  for (int r = 0; r < grid.rows; ++r)
    for (int c = 0; c < grid.cols; ++c)
      for (int y = 0; y < patch; ++y)
        for (int x = 0; x < patch; ++x, v += 3) {
          const int px = c * patch + x;
          const int py = r * patch + y;
          if (px >= image.size.width || py >= image.size.height) continue;
          const uint8_t* rgb = image.at(px, py);
          for (int ch = 0; ch < 3; ++ch) v[ch] = pixel_value(rgb[ch]);
        }
  return out;
}

RgbImage decode_fitted(std::string_view bytes, const ImageOptions& options) {
  RgbImage decoded = decode_image(bytes, options.max_pixels);
  const ImageSize fitted = fit_size(decoded.size, options.max_side);
  if (fitted == decoded.size) return decoded;
  return resize_bilinear(decoded, fitted);
}

Patches image_to_patches(std::string_view bytes, const ImageOptions& options) {
  return cut_patches(decode_fitted(bytes, options), options.patch);
}

}  // namespace meshloom::image
