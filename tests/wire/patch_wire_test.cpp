// Patches on the wire (wire/patch_wire.hpp): the patches of real images
// (tests/data/images, resized and padded as a loader cuts them) come back
// bit for bit in a quarter of their float32 bytes; any other float sends
// the list raw, also bit for bit; a corrupt list is refused naming the peer.
#include "wire/patch_wire.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "base/check.hpp"
#include "image/patches.hpp"
#include "tests/image/image_test_util.hpp"

using namespace meshloom;

namespace {

std::string encoded(const std::vector<float>& values) {
  ByteWriter w;
  wire::put_patches(w, values);
  return w.bytes();
}

std::vector<float> decoded(const std::string& bytes, int peer = 5) {
  ByteReader r(bytes, "token reply", peer);
  std::vector<float> v = wire::get_patches(r);
  EXPECT_TRUE(r.done());
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

}  // namespace

TEST(PatchWire, RealImagesTravelAsPixelsBitForBit) {
  // Sizes no multiple of the patch, so every image has padding; alpha,
  // grey, palette and progressive JPEG decode paths.
  for (const char* name :
       {"hopper_171x200.jpg", "armadillo_gray_alpha_105x52.png", "cats_dogs_rgba_206x50.png",
        "hopper_palette_64x75.png", "wood_progressive_150x94.jpg"}) {
    image::ImageOptions options;
    options.max_side = 120;  // no multiple of 16: padding on every image
    const image::Patches p =
        image::image_to_patches(image::testing::read_test_image(name), options);
    ASSERT_GT(std::count(p.values.begin(), p.values.end(), 0.0f), 0) << name << ": no padding";
    const std::string bytes = encoded(p.values);
    EXPECT_TRUE(same_bits(decoded(bytes), p.values)) << name;
    // One byte a value, the runs of padding and a few counts.
    EXPECT_LT(bytes.size(), p.values.size() * sizeof(float) * 27 / 100)
        << name << ": " << bytes.size() << " bytes for " << p.values.size() << " values";
  }
}

TEST(PatchWire, EveryPixelValueAndPaddingRoundTrip) {
  std::vector<float> values;
  for (int v = 0; v < 256; ++v) values.push_back(image::pixel_value(uint8_t(v)));
  values.insert(values.begin(), 3, 0.0f);  // padding first, in the middle, last
  values.insert(values.begin() + 100, 6, 0.0f);
  values.push_back(0.0f);
  const std::string bytes = encoded(values);
  EXPECT_EQ(bytes[0], 1) << "not sent as pixels";
  EXPECT_TRUE(same_bits(decoded(bytes), values));
  EXPECT_TRUE(same_bits(decoded(encoded({})), {}));
}

TEST(PatchWire, OtherFloatsTravelRawBitForBit) {
  const float pixel = image::pixel_value(17);
  for (float odd : {-0.0f, std::numeric_limits<float>::quiet_NaN(), 0.5f / 127.5f, 1.5f,
                    std::nextafter(pixel, 2.0f), -std::numeric_limits<float>::infinity()}) {
    const std::vector<float> values = {pixel, 0.0f, odd, image::pixel_value(255)};
    const std::string bytes = encoded(values);
    EXPECT_EQ(bytes[0], 0) << odd << " sent as pixels";
    EXPECT_TRUE(same_bits(decoded(bytes), values)) << odd;
  }
}

TEST(PatchWire, ACorruptListIsRefusedNamingThePeer) {
  const std::vector<float> values = {image::pixel_value(1), 0.0f, 0.0f, image::pixel_value(2)};
  const std::string good = encoded(values);
  std::string bad_format = good, long_run = good;
  bad_format[0] = 7;
  long_run[long_run.size() - 1] = 9;  // the run's length: past the list's end
  for (const std::string& bytes :
       {bad_format, long_run, good.substr(0, good.size() - 1), good.substr(0, 5)}) {
    try {
      decoded(bytes, 9);
      FAIL() << "a corrupt patch list was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("token reply from rank 9"), std::string::npos)
          << e.what();
    }
  }
}
