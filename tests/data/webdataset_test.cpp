// WebDataset shards written here with libarchive from the committed test
// images (tests/data/images): grouping by key across a glob of shards, and
// one test per bad-input case, each followed by a good sample that must still
// arrive.
#include "data/webdataset.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>

#include "tests/common/shards.hpp"
#include "tests/common/test_util.hpp"

namespace meshloom::data {
namespace {

using test::Members;
using test::TempDir;
using test::write_shard;

const std::string kJpeg = test::test_image("hopper_gray_37x23.jpg");
const std::string kPng = test::test_image("hopper_palette_64x75.png");

struct Read {
  std::vector<ImageTextSample> samples;
  WebDatasetReport report;
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& s : samples) out.push_back(s.name);
    return out;
  }
};

Read read_all(const std::vector<std::string>& inputs, WebDatasetOptions options = {}) {
  WebDatasetReader reader(inputs, options);
  Read out;
  ImageTextSample s;
  while (reader.next(&s)) out.samples.push_back(s);
  out.report = reader.report();
  return out;
}

// One shard: the bad sample, then a good one that must still arrive.
Read read_one_bad(const Members& bad, WebDatasetOptions options = {}) {
  TempDir dir;
  Members members = bad;
  members.push_back({"good.jpg", kJpeg});
  members.push_back({"good.txt", "a good sample"});
  write_shard(dir.file("s.tar"), members);
  Read r = read_all({dir.file("s.tar")}, options);
  EXPECT_EQ(r.samples.size(), 1u);
  if (!r.samples.empty()) {
    EXPECT_EQ(r.samples.back().caption, "a good sample");
  }
  // Names in problems are relative to the folder, for the assertions.
  for (std::string& p : r.report.problems) p = p.substr(dir.path().size() + 1);
  return r;
}

TEST(WebDataset, GroupsMembersByKeyAcrossAGlobOfShards) {
  TempDir dir;
  write_shard(dir.file("train-000.tar"), {{"a.jpg", kJpeg},
                                          {"a.txt", "caption a"},
                                          {"b.json", R"({"caption": "caption b", "url": "x"})"},
                                          {"b.PNG", kPng},
                                          {"c.1.png", kPng},
                                          {"c.0.jpg", kJpeg},
                                          {"c.txt", "two images"}});
  write_shard(dir.file("train-001.tar.gz"),
              {{"sub.dir/d.jpeg", kJpeg}, {"sub.dir/d.json", R"({"text": "caption d"})"}},
              /*gzip=*/true);
  write_shard(dir.file("other.tar"), {{"z.jpg", kJpeg}, {"z.txt", "not matched"}});
  const Read r = read_all({dir.file("train-*")});
  const std::string s0 = dir.file("train-000.tar:"), s1 = dir.file("train-001.tar.gz:");
  EXPECT_EQ(r.names(), (std::vector<std::string>{s0 + "a", s0 + "b", s0 + "c", s1 + "sub.dir/d"}));
  ASSERT_EQ(r.samples.size(), 4u);
  EXPECT_EQ(r.samples[0].caption, "caption a");
  EXPECT_EQ(r.samples[1].caption, "caption b");
  EXPECT_EQ(r.samples[3].caption, "caption d");
  // c: images in index order, whatever the member order.
  ASSERT_EQ(r.samples[2].images.size(), 2u);
  EXPECT_EQ(r.samples[2].images[0], kJpeg);
  EXPECT_EQ(r.samples[2].sizes, (std::vector<image::ImageSize>{{37, 23}, {64, 75}}));
  // 37x23 -> 3 x 2 patches of 16; 64x75 -> 4 x 5.
  EXPECT_EQ(r.samples[2].image_patches, 6 + 20);
  EXPECT_TRUE(r.samples[2].patches.empty());  // headers only by default
  EXPECT_EQ(r.report.samples, 4u);
  EXPECT_EQ(r.report.images, 5u);
  EXPECT_EQ(r.report.skipped_samples(), 0u);
  EXPECT_TRUE(r.report.problems.empty());
  EXPECT_EQ(r.report.summary(), "4 samples, 5 images");
}

TEST(WebDataset, DecodingGivesTheImagePatches) {
  TempDir dir;
  write_shard(dir.file("s.tar"), {{"a.png", kPng}, {"a.txt", "x"}});
  WebDatasetOptions options;
  options.decode = true;
  options.image.max_side = 32;
  options.image.patch = 8;
  const Read r = read_all({dir.file("s.tar")}, options);
  ASSERT_EQ(r.samples.size(), 1u);
  ASSERT_EQ(r.samples[0].patches.size(), 1u);
  const image::Patches want = image::image_to_patches(kPng, options.image);
  EXPECT_EQ(r.samples[0].patches[0].values, want.values);
  EXPECT_EQ(r.samples[0].image_patches, want.count());  // 27x32 -> 4 x 4
}

TEST(WebDataset, CorruptImageIsCountedAndNamed) {
  std::string corrupt = kJpeg;
  for (size_t i = 3; i < corrupt.size(); ++i) corrupt[i] = char(0xAB);
  const Read r = read_one_bad({{"bad.jpg", corrupt}, {"bad.txt", "x"}});
  EXPECT_EQ(r.report.corrupt_images, 1u);
  ASSERT_EQ(r.report.problems.size(), 1u);
  EXPECT_EQ(r.report.problems[0].rfind("s.tar:bad.jpg: corrupt image (JPEG: ", 0), 0u)
      << r.report.problems[0];
}

TEST(WebDataset, TruncatedImageIsCountedAndNamed) {
  // Damage past the header shows when decoding; a cut header always does.
  WebDatasetOptions decode;
  decode.decode = true;
  const std::string jpeg = test::test_image("hopper_171x200.jpg");
  Read r = read_one_bad({{"cut.jpg", jpeg.substr(0, jpeg.size() / 2)}, {"cut.txt", "x"}}, decode);
  EXPECT_EQ(r.report.truncated_images, 1u);
  ASSERT_EQ(r.report.problems.size(), 1u);
  EXPECT_EQ(r.report.problems[0].rfind("s.tar:cut.jpg: truncated image", 0), 0u)
      << r.report.problems[0];
  r = read_one_bad({{"cut.png", kPng.substr(0, 20)}, {"cut.txt", "x"}});
  EXPECT_EQ(r.report.truncated_images, 1u);
}

TEST(WebDataset, ImageWithoutCaptionIsCountedAndNamed) {
  const Read r = read_one_bad({{"lonely.jpg", kJpeg}});
  EXPECT_EQ(r.report.images_without_caption, 1u);
  ASSERT_EQ(r.report.problems.size(), 1u);
  EXPECT_EQ(r.report.problems[0],
            "s.tar:lonely.jpg: an image without caption (.txt or .json), sample skipped");
}

TEST(WebDataset, CaptionWithoutImageIsCountedAndNamed) {
  const Read r = read_one_bad({{"words.txt", "no picture"}});
  EXPECT_EQ(r.report.captions_without_image, 1u);
  ASSERT_EQ(r.report.problems.size(), 1u);
  EXPECT_EQ(r.report.problems[0], "s.tar:words.txt: a caption without image, sample skipped");
}

TEST(WebDataset, UnsupportedFormatsAreCountedAndNamed) {
  const std::string gif = "GIF89a\x01\x00\x01\x00\x00\x00\x00;";
  // A .gif member: skipped, and its sample has no image left.
  Read r = read_one_bad({{"anim.gif", gif}, {"anim.txt", "x"}});
  EXPECT_EQ(r.report.unsupported_members, 1u);
  EXPECT_EQ(r.report.captions_without_image, 1u);
  ASSERT_EQ(r.report.problems.size(), 2u);
  EXPECT_EQ(r.report.problems[0].rfind("s.tar:anim.gif: unsupported member format \".gif\"", 0),
            0u);
  // A .bmp beside a good image: the sample keeps its image.
  TempDir dir;
  write_shard(dir.file("s.tar"), {{"k.bmp", "BM..."}, {"k.jpg", kJpeg}, {"k.txt", "x"}});
  const Read kept = read_all({dir.file("s.tar")});
  EXPECT_EQ(kept.samples.size(), 1u);
  EXPECT_EQ(kept.report.unsupported_members, 1u);
  // A .jpg holding a GIF: an unsupported image.
  r = read_one_bad({{"fake.jpg", gif}, {"fake.txt", "x"}});
  EXPECT_EQ(r.report.unsupported_images, 1u);
  ASSERT_EQ(r.report.problems.size(), 1u);
  EXPECT_EQ(r.report.problems[0],
            "s.tar:fake.jpg: unsupported image (neither JPEG nor PNG), sample skipped");
}

TEST(WebDataset, ImageOverMaxPixelsIsCountedAndNamed) {
  WebDatasetOptions options;
  options.image.max_pixels = 37 * 23;  // the good sample's image just fits
  const Read r = read_one_bad({{"big.png", kPng}, {"big.txt", "x"}}, options);
  EXPECT_EQ(r.report.too_large_images, 1u);
  ASSERT_EQ(r.report.problems.size(), 1u);
  EXPECT_EQ(r.report.problems[0],
            "s.tar:big.png: too large image (64x75 is more than the 851 pixels allowed "
            "(data.image.max_pixels)), sample skipped");
}

TEST(WebDataset, BadJsonCaptionsRepeatedMembersAndInvalidUtf8) {
  Read r = read_one_bad({{"j.jpg", kJpeg}, {"j.json", R"({"url": "no caption"})"}});
  EXPECT_EQ(r.report.bad_captions, 1u);
  r = read_one_bad({{"j.jpg", kJpeg}, {"j.json", "{not json"}});
  EXPECT_EQ(r.report.bad_captions, 1u);

  TempDir dir;
  write_shard(dir.file("s.tar"), {{"r.jpg", kJpeg},
                                  {"r.txt", "first"},
                                  {"r.txt", "second"},
                                  {"u.jpg", kJpeg},
                                  {"u.txt", "caf\xE9"}});
  const Read more = read_all({dir.file("s.tar")});
  ASSERT_EQ(more.samples.size(), 2u);
  EXPECT_EQ(more.samples[0].caption, "first");
  EXPECT_EQ(more.report.duplicate_members, 1u);
  EXPECT_EQ(more.samples[1].caption, "caf\xEF\xBF\xBD");
  EXPECT_EQ(more.report.invalid_utf8_captions, 1u);
  EXPECT_EQ(more.report.summary(),
            "2 samples, 2 images; skipped: 1 repeated member; 1 caption with invalid UTF-8 "
            "repaired");
}

TEST(WebDataset, EmptyMembersAreCounted) {
  const Read r = read_one_bad({{"e.jpg", kJpeg}, {"e.txt", ""}});
  EXPECT_EQ(r.report.empty_members, 1u);
  EXPECT_EQ(r.report.images_without_caption, 1u);
}

TEST(WebDataset, MissingInputsAreErrorsNamingThem) {
  TempDir dir;
  try {
    read_all({dir.file("nothing-*.tar")});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nothing-*.tar: no shard matches"), std::string::npos);
  }
  EXPECT_THROW(read_all({dir.file("absent.tar")}), Error);
}

TEST(WebDataset, ReadsWhatPackImagesWrites) {
  // scripts/data/pack_images.py on the committed test images, 3 per shard.
  if (access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/python3";
  TempDir dir;
  const std::string source = MESHLOOM_SOURCE_DIR;
  const std::string command = "/usr/bin/python3 " + source + "/scripts/data/pack_images.py " +
                              "--per-shard 3 " + dir.file("shard") + " " + source +
                              "/tests/data/images >/dev/null";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  WebDatasetOptions options;
  options.decode = true;
  const Read r = read_all({dir.file("shard-*.tar")}, options);
  EXPECT_EQ(r.report.summary(), "8 samples, 8 images");
  ASSERT_EQ(r.samples.size(), 8u);
  // Sorted file names: armadillo, cats_dogs, hopper_171x200, ...
  EXPECT_EQ(r.samples[1].name, dir.file("shard-000000.tar:000000001"));
  EXPECT_EQ(r.samples[1].caption, "cats dogs rgba 206x50");
  EXPECT_EQ(r.samples[7].name, dir.file("shard-000002.tar:000000007"));
  for (const ImageTextSample& s : r.samples) {
    ASSERT_EQ(s.patches.size(), 1u) << s.name;
    EXPECT_EQ(s.patches[0].count(), s.image_patches) << s.name;
  }
}

}  // namespace
}  // namespace meshloom::data
