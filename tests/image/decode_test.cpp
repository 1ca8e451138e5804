#include "image/decode.hpp"

#include <gtest/gtest.h>

#include "image/patches.hpp"
#include "image_test_util.hpp"

namespace meshloom::image {
namespace {

using testing::read_test_image;

struct Sample {
  const char* file;
  ImageSize size;
};
const Sample kImages[] = {
    {"wood_320x200.jpg", {320, 200}},         {"wood_progressive_150x94.jpg", {150, 94}},
    {"hopper_171x200.jpg", {171, 200}},       {"hopper_gray_37x23.jpg", {37, 23}},
    {"hopper_gray_37x23.png", {37, 23}},      {"hopper_palette_64x75.png", {64, 75}},
    {"cats_dogs_rgba_206x50.png", {206, 50}}, {"armadillo_gray_alpha_105x52.png", {105, 52}},
};

ImageProblem problem_of(const std::string& bytes, uint64_t max_pixels = 1 << 30) {
  try {
    decode_image(bytes, max_pixels);
  } catch (const ImageError& e) {
    EXPECT_FALSE(std::string(e.what()).empty());
    return e.kind;
  }
  ADD_FAILURE() << "decoded without error";
  return ImageProblem::kCorrupt;
}

TEST(ImageDecode, SniffsTheFormatFromMagicBytes) {
  EXPECT_EQ(sniff_format(read_test_image("wood_320x200.jpg")), ImageFormat::kJpeg);
  EXPECT_EQ(sniff_format(read_test_image("hopper_gray_37x23.png")), ImageFormat::kPng);
  EXPECT_EQ(sniff_format("GIF89a......"), ImageFormat::kUnknown);
  EXPECT_EQ(sniff_format(""), ImageFormat::kUnknown);
}

TEST(ImageDecode, HeaderSizeEqualsDecodedSize) {
  for (const Sample& s : kImages) {
    SCOPED_TRACE(s.file);
    const std::string bytes = read_test_image(s.file);
    ASSERT_FALSE(bytes.empty());
    EXPECT_EQ(image_size(bytes), s.size);
    const RgbImage image = decode_image(bytes, 1 << 30);
    EXPECT_EQ(image.size, s.size);
    EXPECT_EQ(image.pixels.size(), s.size.pixels() * 3);
  }
}

TEST(ImageDecode, HeaderSizeNeedsOnlyTheHeader) {
  // A JPEG cut after its start-of-scan header and a PNG cut after IHDR tell
  // their sizes, though neither decodes.
  const std::string jpeg = read_test_image("wood_320x200.jpg");
  const size_t sos = jpeg.find("\xFF\xDA");
  ASSERT_NE(sos, std::string::npos);
  const std::string jpeg_head =
      jpeg.substr(0, sos + 2 + (uint8_t(jpeg[sos + 2]) << 8) + uint8_t(jpeg[sos + 3]));
  EXPECT_EQ(image_size(jpeg_head), (ImageSize{320, 200}));
  EXPECT_THROW(decode_image(jpeg_head, 1 << 30), ImageError);
  EXPECT_EQ(image_size(read_test_image("cats_dogs_rgba_206x50.png").substr(0, 33)),
            (ImageSize{206, 50}));
  EXPECT_THROW(decode_image(read_test_image("cats_dogs_rgba_206x50.png").substr(0, 33), 1 << 30),
               ImageError);
}

TEST(ImageDecode, GrayscaleRepeatsTheValueInEveryChannel) {
  for (const char* file : {"hopper_gray_37x23.jpg", "hopper_gray_37x23.png"}) {
    const RgbImage image = decode_image(read_test_image(file), 1 << 30);
    for (size_t i = 0; i < image.pixels.size(); i += 3) {
      ASSERT_EQ(image.pixels[i], image.pixels[i + 1]) << file;
      ASSERT_EQ(image.pixels[i], image.pixels[i + 2]) << file;
    }
  }
}

TEST(ImageDecode, AlphaIsCompositedOnBlack) {
  // The clip art's corners are fully transparent.
  for (const char* file : {"cats_dogs_rgba_206x50.png", "armadillo_gray_alpha_105x52.png"}) {
    const RgbImage image = decode_image(read_test_image(file), 1 << 30);
    const uint8_t* corner = image.at(0, 0);
    EXPECT_EQ(corner[0] + corner[1] + corner[2], 0) << file;
  }
}

TEST(ImageDecode, TruncatedImagesAreTruncated) {
  const std::string jpeg = read_test_image("hopper_171x200.jpg");
  EXPECT_EQ(problem_of(jpeg.substr(0, jpeg.size() / 2)), ImageProblem::kTruncated);
  EXPECT_EQ(problem_of(jpeg.substr(0, 100)), ImageProblem::kTruncated);
  const std::string png = read_test_image("cats_dogs_rgba_206x50.png");
  EXPECT_EQ(problem_of(png.substr(0, png.size() / 2)), ImageProblem::kTruncated);
  EXPECT_EQ(problem_of(png.substr(0, png.size() - 6)), ImageProblem::kTruncated);  // no IEND
}

TEST(ImageDecode, CorruptImagesAreCorrupt) {
  std::string jpeg = read_test_image("hopper_171x200.jpg");
  for (size_t i = 3; i < jpeg.size(); ++i) jpeg[i] = char(0xAB);  // SOI, then noise
  EXPECT_EQ(problem_of(jpeg), ImageProblem::kCorrupt);
  std::string png = read_test_image("cats_dogs_rgba_206x50.png");
  png[png.size() / 2] ^= 0x55;  // inside IDAT: the chunk's CRC no longer matches
  EXPECT_EQ(problem_of(png), ImageProblem::kCorrupt);
  std::string ihdr = read_test_image("hopper_gray_37x23.png");
  ihdr[24] = 7;  // bit depth 7 does not exist
  EXPECT_EQ(problem_of(ihdr), ImageProblem::kCorrupt);
}

TEST(ImageDecode, OtherFormatsAreUnsupported) {
  EXPECT_EQ(problem_of("GIF89a\x01\x00\x01\x00\x00\x00\x00;"), ImageProblem::kUnsupported);
  EXPECT_EQ(problem_of("BM\x3a\x00\x00\x00"), ImageProblem::kUnsupported);
  EXPECT_EQ(problem_of(""), ImageProblem::kUnsupported);
}

TEST(ImageDecode, ImagesOverMaxPixelsAreRefusedFromTheHeader) {
  EXPECT_EQ(problem_of(read_test_image("wood_320x200.jpg"), 320 * 200 - 1),
            ImageProblem::kTooLarge);
  EXPECT_EQ(problem_of(read_test_image("hopper_palette_64x75.png"), 64 * 75 - 1),
            ImageProblem::kTooLarge);
  EXPECT_NO_THROW(decode_image(read_test_image("hopper_palette_64x75.png"), 64 * 75));
}

TEST(ImageDecode, PatchCountFromTheHeaderEqualsTheCutPatches) {
  for (const Sample& s : kImages)
    for (const ImageOptions options : {ImageOptions{512, 16}, ImageOptions{64, 16},
                                       ImageOptions{100, 14}, ImageOptions{37, 8}}) {
      SCOPED_TRACE(std::string(s.file) + " max_side " + std::to_string(options.max_side));
      const std::string bytes = read_test_image(s.file);
      EXPECT_EQ(patch_count(image_size(bytes), options), image_to_patches(bytes, options).count());
    }
}

}  // namespace
}  // namespace meshloom::image
