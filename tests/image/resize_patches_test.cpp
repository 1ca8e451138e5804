#include <gtest/gtest.h>

#include "image/patches.hpp"
#include "image/resize.hpp"

namespace meshloom::image {
namespace {

RgbImage filled(ImageSize size, uint8_t (*value)(int x, int y, int c)) {
  RgbImage image{size, std::vector<uint8_t>(size.pixels() * 3)};
  for (int y = 0; y < size.height; ++y)
    for (int x = 0; x < size.width; ++x)
      for (int c = 0; c < 3; ++c)
        image.pixels[(size_t(y) * size.width + x) * 3 + c] = value(x, y, c);
  return image;
}

TEST(ImageResize, FitSizeKeepsTheAspectRatioAndNeverUpscales) {
  EXPECT_EQ(fit_size({320, 200}, 512), (ImageSize{320, 200}));
  EXPECT_EQ(fit_size({512, 512}, 512), (ImageSize{512, 512}));
  EXPECT_EQ(fit_size({1024, 768}, 512), (ImageSize{512, 384}));
  EXPECT_EQ(fit_size({200, 320}, 100), (ImageSize{63, 100}));  // 62.5 rounds up
  EXPECT_EQ(fit_size({37, 23}, 10), (ImageSize{10, 6}));       // 6.2
  EXPECT_EQ(fit_size({10000, 3}, 100), (ImageSize{100, 1}));   // never 0
}

TEST(ImageResize, ConstantStaysConstant) {
  const RgbImage in = filled({97, 61}, [](int, int, int c) { return uint8_t(40 + 70 * c); });
  for (const ImageSize size : {ImageSize{13, 7}, ImageSize{97, 30}, ImageSize{200, 61}}) {
    const RgbImage out = resize_bilinear(in, size);
    ASSERT_EQ(out.size, size);
    for (int y = 0; y < size.height; ++y)
      for (int x = 0; x < size.width; ++x)
        for (int c = 0; c < 3; ++c) ASSERT_EQ(out.at(x, y)[c], 40 + 70 * c);
  }
}

TEST(ImageResize, ShrinkingAveragesEveryInputPixel) {
  // Antialiasing: a one-pixel-wide line shrunk 8x still shows, at 1/8 strength
  // or more, where nearest-neighbour or a fixed 2-tap bilinear could miss it.
  const RgbImage in = filled({64, 8}, [](int x, int, int) { return uint8_t(x == 21 ? 255 : 0); });
  const RgbImage out = resize_bilinear(in, {8, 1});
  int total = 0;
  for (int x = 0; x < 8; ++x) total += out.at(x, 0)[0];
  EXPECT_GE(total, 255 / 8 - 1);
  EXPECT_GT(out.at(2, 0)[0], 0);
}

TEST(ImageResize, SameSizeIsACopy) {
  const RgbImage in =
      filled({5, 4}, [](int x, int y, int c) { return uint8_t(x * 50 + y * 7 + c); });
  EXPECT_EQ(resize_bilinear(in, in.size).pixels, in.pixels);
}

TEST(ImagePatches, RasterOrderRowsColumnsChannelsAndZeroPadding) {
  // 5 x 3 pixels, p = 2: a 2 x 3 grid, the last column and row half padding.
  const RgbImage in =
      filled({5, 3}, [](int x, int y, int c) { return uint8_t(100 * c + 10 * y + x); });
  const Patches patches = cut_patches(in, 2);
  ASSERT_EQ(patches.rows, 2);
  ASSERT_EQ(patches.cols, 3);
  ASSERT_EQ(patches.values.size(), size_t(6 * 2 * 2 * 3));
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < 2; ++y)
        for (int x = 0; x < 2; ++x)
          for (int ch = 0; ch < 3; ++ch) {
            const float v = patches.values[((r * 3 + c) * 4 + y * 2 + x) * 3 + ch];
            const int px = c * 2 + x, py = r * 2 + y;
            if (px >= 5 || py >= 3)
              EXPECT_EQ(v, 0.0f);
            else
              EXPECT_EQ(v, float(100 * ch + 10 * py + px) / 127.5f - 1.0f);
          }
}

TEST(ImagePatches, BlackIsMinusOneWhiteIsPlusOne) {
  const RgbImage in = filled({2, 1}, [](int x, int, int) { return uint8_t(x == 0 ? 0 : 255); });
  const Patches patches = cut_patches(in, 1);
  EXPECT_EQ(patches.values, (std::vector<float>{-1, -1, -1, 1, 1, 1}));
}

TEST(ImagePatches, PatchCountFollowsTheFittedSize) {
  EXPECT_EQ(patch_count({320, 200}, {512, 16}), 20 * 13);
  EXPECT_EQ(patch_count({1024, 768}, {512, 16}), 32 * 24);
  EXPECT_EQ(patch_count({37, 23}, {512, 16}), 3 * 2);
  EXPECT_EQ(patch_count({1, 1}, {512, 16}), 1);
}

}  // namespace
}  // namespace meshloom::image
