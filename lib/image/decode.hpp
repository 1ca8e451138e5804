// Decoding JPEG and PNG bytes into 8-bit RGB, and reading an image's size from
// its header alone (for the lead, which needs lengths, not pixels).
//
// Conversions, chosen so that PIL's `Image.open(f).convert("RGBA")` followed by
// compositing on black gives the same pixels:
//   - grayscale: the gray value in R, G and B
//   - palette: expanded to its colours (a tRNS chunk gives alpha)
//   - alpha (RGBA, gray + alpha, tRNS): composited on black, that is
//     c' = round(c * a / 255), so that transparent areas are uniform black and
//     not whatever colour the encoder left under them
//   - 16-bit PNG channels: the high byte
//   - JPEG: libjpeg-turbo's default decode (islow IDCT, fancy upsampling), as
//     PIL's; CMYK and YCCK JPEGs are refused as unsupported
// EXIF orientation is not applied (PIL's open does not apply it either).
//
// The format is told by the first bytes, not by a file name. Errors throw
// ImageError with a kind (for the caller's counters) and a short reason; the
// caller adds the file or member name. JPEG warnings (premature end of data,
// corrupt entropy data) count as errors: a damaged image is refused, not
// decoded into garbage. PNG warnings (ancillary chunks, such as a known bad
// sRGB profile) are harmless and ignored.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/check.hpp"

namespace meshloom::image {

enum class ImageFormat { kUnknown, kJpeg, kPng };

// The format from the magic bytes: FF D8 FF (JPEG) or the PNG signature.
ImageFormat sniff_format(std::string_view bytes);

enum class ImageProblem {
  kCorrupt,      // the decoder refused the data
  kTruncated,    // the data ends early
  kUnsupported,  // neither JPEG nor PNG, or a JPEG colour space we do not convert
  kTooLarge,     // more pixels than allowed
};
const char* image_problem_name(ImageProblem problem);  // "corrupt", "truncated", ...

struct ImageError : Error {
  ImageError(ImageProblem problem, const std::string& reason) : Error(reason), kind(problem) {}
  ImageProblem kind;
};

struct ImageSize {
  int width = 0;
  int height = 0;
  uint64_t pixels() const { return uint64_t(width) * uint64_t(height); }
  bool operator==(const ImageSize&) const = default;
};

// Pixels row-major, 3 bytes (R, G, B) per pixel.
struct RgbImage {
  ImageSize size;
  std::vector<uint8_t> pixels;
  const uint8_t* at(int x, int y) const { return &pixels[(size_t(y) * size.width + x) * 3]; }
};

// The size from the header (JPEG: up to the start of frame; PNG: IHDR),
// without decoding pixels. Throws ImageError.
ImageSize image_size(std::string_view bytes);

// Decodes to RGB. An image of more than max_pixels pixels is refused from its
// header (kTooLarge) before any pixel memory is allocated. Throws ImageError.
RgbImage decode_image(std::string_view bytes, uint64_t max_pixels);

}  // namespace meshloom::image
