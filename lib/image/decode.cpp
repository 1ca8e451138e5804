// JPEG through the libjpeg API (libjpeg-turbo), PNG through libpng. Both
// libraries report errors by longjmp: each decode runs in one plain function
// that owns the setjmp and keeps its state in a job struct the caller holds,
// so no C++ object lives across a jump. Reasons become ImageError outside.
#include "image/decode.hpp"

#include <png.h>

#include <csetjmp>
#include <cstdio>  // jpeglib.h needs FILE
#include <cstring>
#include <memory>

#include "base/strings.hpp"

extern "C" {
#include <jerror.h>  // after jpeglib.h: the message codes (JWRN_JPEG_EOF)
#include <jpeglib.h>
}

namespace meshloom::image {
namespace {

constexpr unsigned char kPngSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

// ---- JPEG ------------------------------------------------------------------

struct JpegErrors {
  jpeg_error_mgr pub;  // first, so that cinfo->err points at the whole struct
  std::jmp_buf jump;
  int code = 0;
  char message[JMSG_LENGTH_MAX] = {};
};

void on_jpeg_error(j_common_ptr cinfo) {
  auto* errors = reinterpret_cast<JpegErrors*>(cinfo->err);
  errors->code = errors->pub.msg_code;
  (*cinfo->err->format_message)(cinfo, errors->message);
  std::longjmp(errors->jump, 1);
}

// Level -1 is a warning about the data (premature end, corrupt entropy data):
// an error here. Levels >= 0 are traces.
void on_jpeg_message(j_common_ptr cinfo, int level) {
  if (level < 0) on_jpeg_error(cinfo);
}

struct JpegJob {
  const unsigned char* data = nullptr;
  size_t size = 0;
  bool header_only = false;
  uint64_t max_pixels = 0;
  // Results.
  ImageSize image_size;
  bool too_large = false;
  bool unsupported_colors = false;
  std::vector<uint8_t>* pixels = nullptr;
  jpeg_decompress_struct cinfo;
  JpegErrors errors;
};

// False on a libjpeg error (job->errors says which).
bool run_jpeg(JpegJob* job) {
  jpeg_decompress_struct* cinfo = &job->cinfo;
  cinfo->err = jpeg_std_error(&job->errors.pub);
  job->errors.pub.error_exit = on_jpeg_error;
  job->errors.pub.emit_message = on_jpeg_message;
  jpeg_create_decompress(cinfo);
  if (setjmp(job->errors.jump)) {
    jpeg_destroy_decompress(cinfo);
    return false;
  }
  jpeg_mem_src(cinfo, job->data, static_cast<unsigned long>(job->size));
  jpeg_read_header(cinfo, TRUE);
  job->image_size = {static_cast<int>(cinfo->image_width), static_cast<int>(cinfo->image_height)};
  const J_COLOR_SPACE space = cinfo->jpeg_color_space;
  job->unsupported_colors = space != JCS_GRAYSCALE && space != JCS_YCbCr && space != JCS_RGB;
  job->too_large = job->image_size.pixels() > job->max_pixels;
  if (job->header_only || job->too_large || job->unsupported_colors) {
    jpeg_destroy_decompress(cinfo);
    return true;
  }
  cinfo->out_color_space = JCS_RGB;
  jpeg_start_decompress(cinfo);
  const size_t stride = size_t(cinfo->output_width) * 3;
  job->pixels->resize(stride * cinfo->output_height);
  while (cinfo->output_scanline < cinfo->output_height) {
    JSAMPROW row = job->pixels->data() + stride * cinfo->output_scanline;
    jpeg_read_scanlines(cinfo, &row, 1);
  }
  jpeg_finish_decompress(cinfo);
  jpeg_destroy_decompress(cinfo);
  return true;
}

RgbImage jpeg(std::string_view bytes, bool header_only, uint64_t max_pixels) {
  RgbImage out;
  auto job = std::make_unique<JpegJob>();
  job->data = reinterpret_cast<const unsigned char*>(bytes.data());
  job->size = bytes.size();
  job->header_only = header_only;
  job->max_pixels = max_pixels;
  job->pixels = &out.pixels;
  if (!run_jpeg(job.get())) {
    const bool truncated = job->errors.code == JWRN_JPEG_EOF;
    throw ImageError(truncated ? ImageProblem::kTruncated : ImageProblem::kCorrupt,
                     std::string("JPEG: ") + job->errors.message);
  }
  out.size = job->image_size;
  if (header_only) return out;
  if (job->unsupported_colors)
    throw ImageError(ImageProblem::kUnsupported,
                     "JPEG: CMYK or YCCK colours are not supported (only RGB and grayscale)");
  if (job->too_large)
    throw ImageError(ImageProblem::kTooLarge,
                     strf("%dx%d is more than the %llu pixels allowed", out.size.width,
                          out.size.height, static_cast<unsigned long long>(max_pixels)));
  return out;
}

// ---- PNG -------------------------------------------------------------------

struct PngJob {
  const unsigned char* data = nullptr;
  size_t size = 0;
  size_t pos = 0;
  bool header_only = false;
  uint64_t max_pixels = 0;
  // Results.
  ImageSize image_size;
  bool too_large = false;
  bool truncated = false;
  int channels = 0;  // 3 or 4 after the transforms
  std::vector<uint8_t> samples;
  std::vector<png_bytep> rows;
  char message[256] = {};
};

void on_png_read(png_structp png, png_bytep out, size_t n) {
  auto* job = static_cast<PngJob*>(png_get_io_ptr(png));
  if (job->size - job->pos < n) {
    job->truncated = true;
    png_error(png, "the data ends early");
  }
  std::memcpy(out, job->data + job->pos, n);
  job->pos += n;
}

void on_png_error(png_structp png, png_const_charp message) {
  auto* job = static_cast<PngJob*>(png_get_error_ptr(png));
  std::snprintf(job->message, sizeof(job->message), "%s", message);
  png_longjmp(png, 1);
}

void on_png_warning(png_structp, png_const_charp) {}

bool run_png(PngJob* job) {
  png_structp png =
      png_create_read_struct(PNG_LIBPNG_VER_STRING, job, on_png_error, on_png_warning);
  if (png == nullptr) {
    std::snprintf(job->message, sizeof(job->message), "out of memory");
    return false;
  }
  png_infop info = png_create_info_struct(png);
  if (info == nullptr || setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  png_set_read_fn(png, job, on_png_read);
  png_read_info(png, info);
  job->image_size = {static_cast<int>(png_get_image_width(png, info)),
                     static_cast<int>(png_get_image_height(png, info))};
  job->too_large = job->image_size.pixels() > job->max_pixels;
  if (job->header_only || job->too_large) {
    png_destroy_read_struct(&png, &info, nullptr);
    return true;
  }
  png_set_expand(png);  // palette -> RGB, gray < 8 bits -> 8, tRNS -> alpha
  png_set_strip_16(png);
  png_set_gray_to_rgb(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  job->channels = png_get_channels(png, info);
  const size_t stride = png_get_rowbytes(png, info);
  job->samples.resize(stride * job->image_size.height);
  job->rows.resize(job->image_size.height);
  for (int y = 0; y < job->image_size.height; ++y) job->rows[y] = &job->samples[stride * y];
  png_read_image(png, job->rows.data());
  png_read_end(png, nullptr);  // a file cut before IEND is truncated too
  png_destroy_read_struct(&png, &info, nullptr);
  return true;
}

// RGBA -> RGB on black: round(c * a / 255), exact in integers (c * a / 255 is
// never halfway, 255 being odd).
void composite_on_black(const uint8_t* rgba, size_t pixels, uint8_t* rgb) {
  for (size_t i = 0; i < pixels; ++i) {
    const unsigned a = rgba[i * 4 + 3];
    for (int c = 0; c < 3; ++c) rgb[i * 3 + c] = uint8_t((rgba[i * 4 + c] * a + 127) / 255);
  }
}

RgbImage png(std::string_view bytes, bool header_only, uint64_t max_pixels) {
  auto job = std::make_unique<PngJob>();
  job->data = reinterpret_cast<const unsigned char*>(bytes.data());
  job->size = bytes.size();
  job->header_only = header_only;
  job->max_pixels = max_pixels;
  if (!run_png(job.get()))
    throw ImageError(job->truncated ? ImageProblem::kTruncated : ImageProblem::kCorrupt,
                     std::string("PNG: ") + job->message);
  RgbImage out;
  out.size = job->image_size;
  if (header_only) return out;
  if (job->too_large)
    throw ImageError(ImageProblem::kTooLarge,
                     strf("%dx%d is more than the %llu pixels allowed", out.size.width,
                          out.size.height, static_cast<unsigned long long>(max_pixels)));
  const size_t pixels = out.size.pixels();
  if (job->channels == 3) {
    out.pixels = std::move(job->samples);
  } else {
    ML_CHECK(job->channels == 4, strf("libpng gave %d channels after expansion", job->channels));
    out.pixels.resize(pixels * 3);
    composite_on_black(job->samples.data(), pixels, out.pixels.data());
  }
  return out;
}

// The size from IHDR, which the PNG format puts first; libpng's read_info
// would read every chunk up to the pixel data.
ImageSize png_header_size(std::string_view bytes) {
  const auto* b = reinterpret_cast<const unsigned char*>(bytes.data());
  if (bytes.size() < 24) throw ImageError(ImageProblem::kTruncated, "PNG: the data ends in IHDR");
  const auto be32 = [&](size_t at) {
    return uint32_t(b[at]) << 24 | uint32_t(b[at + 1]) << 16 | uint32_t(b[at + 2]) << 8 | b[at + 3];
  };
  if (be32(8) != 13 || std::memcmp(b + 12, "IHDR", 4) != 0)
    throw ImageError(ImageProblem::kCorrupt, "PNG: the first chunk is no IHDR");
  const uint32_t width = be32(16), height = be32(20);
  if (width == 0 || height == 0 || width > PNG_UINT_31_MAX || height > PNG_UINT_31_MAX)
    throw ImageError(ImageProblem::kCorrupt, strf("PNG: IHDR gives the size %ux%u", width, height));
  return {int(width), int(height)};
}

RgbImage decode(std::string_view bytes, bool header_only, uint64_t max_pixels) {
  switch (sniff_format(bytes)) {
    case ImageFormat::kJpeg:
      return jpeg(bytes, header_only, max_pixels);
    case ImageFormat::kPng:
      if (header_only) return {png_header_size(bytes), {}};
      return png(bytes, header_only, max_pixels);
    case ImageFormat::kUnknown:
      break;
  }
  throw ImageError(ImageProblem::kUnsupported, "neither JPEG nor PNG");
}

}  // namespace

ImageFormat sniff_format(std::string_view bytes) {
  const auto* b = reinterpret_cast<const unsigned char*>(bytes.data());
  if (bytes.size() >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF) return ImageFormat::kJpeg;
  if (bytes.size() >= 8 && std::memcmp(b, kPngSignature, 8) == 0) return ImageFormat::kPng;
  return ImageFormat::kUnknown;
}

const char* image_problem_name(ImageProblem problem) {
  switch (problem) {
    case ImageProblem::kCorrupt:
      return "corrupt";
    case ImageProblem::kTruncated:
      return "truncated";
    case ImageProblem::kUnsupported:
      return "unsupported";
    case ImageProblem::kTooLarge:
      return "too large";
  }
  return "?";
}

ImageSize image_size(std::string_view bytes) {
  return decode(bytes, /*header_only=*/true, UINT64_MAX).size;
}

RgbImage decode_image(std::string_view bytes, uint64_t max_pixels) {
  return decode(bytes, /*header_only=*/false, max_pixels);
}

}  // namespace meshloom::image
