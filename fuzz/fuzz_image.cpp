// lib/image: the size from the header, the decode (libjpeg-turbo and libpng,
// which report errors by longjmp) and the patches. The input is the image's
// bytes. Bad input is one ImageError with a reason; the caller names the file.
#include <cmath>

#include "fuzz/harness.hpp"
#include "image/patches.hpp"
#include "image/resize.hpp"

using namespace meshloom;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::init();
  const std::string_view bytes = fuzz::bytes(data, size);
  image::ImageOptions options;
  options.max_side = 48;
  options.patch = 16;
  options.max_pixels = 1 << 20;  // what the input can justify: no 4 GB canvases
  bool header_read = false;
  image::ImageSize header;
  try {
    header = image::image_size(bytes);
    header_read = true;
  } catch (const image::ImageError& e) {
    if (std::string(e.what()).empty()) fuzz::finding("an ImageError without a reason");
  }
  try {
    const image::RgbImage decoded = image::decode_image(bytes, options.max_pixels);
    if (!header_read) fuzz::finding("decoded an image whose header was refused");
    if (!(decoded.size == header)) fuzz::finding("the decoded size differs from the header's");
    if (decoded.pixels.size() != decoded.size.pixels() * 3)
      fuzz::finding("the pixels do not fill the image");
    const image::ImageSize fitted = image::fit_size(decoded.size, options.max_side);
    const image::Patches patches =
        image::cut_patches(image::resize_bilinear(decoded, fitted), options.patch);
    if (patches.count() != image::patch_count(header, options))
      fuzz::finding("patch_count() from the header differs from the patches cut");
    for (const float v : patches.values)
      if (!(v >= -1.0f && v <= 1.0f)) fuzz::finding("a patch value outside [-1, 1]");
  } catch (const image::ImageError& e) {
    if (std::string(e.what()).empty()) fuzz::finding("an ImageError without a reason");
  }
  return 0;
}
