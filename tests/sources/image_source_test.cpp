// An image-text source as loaders serve it (sources/image_source.hpp), on
// shards of the committed test images: its tokens are the image positions
// then the caption's ids, its patches are lib/image's (checked against PIL by
// image.pil_compare) for any range, and an image damaged past its header keeps
// its planned length with blank patches. As a loader drives it: a length
// request needs only the image headers and the captions (one calibration
// decode, so that the reply carries a decoding cost), decoding comes with
// prepare() and is counted, patches asked for before that are decoded at read
// (and counted), and the measured cost gives the image source more loaders
// than a text source of the same mixture weight.
#include "sources/image_source.hpp"

#include <gtest/gtest.h>

#include <numeric>

#include "dataplane/partition.hpp"
#include "image/patches.hpp"
#include "model/batch.hpp"
#include "tests/common/shards.hpp"
#include "tests/common/test_util.hpp"
#include "tokenizer/tokenizer.hpp"

namespace meshloom {
namespace {

using sources::DocSource;
using sources::encode_document;
using sources::image_options;
using sources::open_doc_source;
using sources::open_image_source;
using test::TempDir;

const std::string kJpeg = test::test_image("hopper_171x200.jpg");
const std::string kPng = test::test_image("hopper_palette_64x75.png");
const std::string kGray = test::test_image("hopper_gray_37x23.png");

config::DataConfig data_config(int64_t cache_mib = 256) {
  config::DataConfig d;
  d.image.max_side = 32;
  d.image.patch = 8;
  d.image.cache_mib = cache_mib;
  return d;
}

config::SourceConfig source_at(const std::string& path) {
  config::SourceConfig s;
  s.name = "pictures";
  s.path = path;
  s.format = config::SourceFormat::webdataset;
  s.tokenizer = "byte";
  return s;
}

// A shard of three samples: one image; two images (.0.jpg, .1.png) with a
// JSON caption; a JPEG cut short after its header.
std::string three_samples(const TempDir& dir) {
  const std::string path = dir.file("s-000.tar");
  test::write_shard(path, {{"a.png", kPng},
                           {"a.txt", "a palette hopper"},
                           {"b.0.jpg", kJpeg},
                           {"b.1.png", kGray},
                           {"b.json", R"({"caption": "two hoppers"})"},
                           {"c.jpg", kJpeg.substr(0, kJpeg.size() * 6 / 10)},
                           {"c.txt", "cut short"}});
  return path;
}

std::vector<float> patches_of(const std::vector<std::string>& images, const config::DataConfig& d) {
  std::vector<float> out;
  for (const auto& bytes : images) {
    const image::Patches p = image::image_to_patches(bytes, image_options(d.image));
    out.insert(out.end(), p.values.begin(), p.values.end());
  }
  return out;
}

TEST(ImageSource, ServesTokensAndPatchesOfAnyRange) {
  TempDir dir;
  three_samples(dir);
  const config::DataConfig d = data_config();
  auto src = open_image_source(source_at(dir.path() + "/s-*.tar"), d);
  ASSERT_EQ(src->docs(), 3);
  const auto byte = tokenizer::make_tokenizer("byte");
  const image::ImageOptions opt = image_options(d.image);
  const int64_t a_patches = image::patch_count(image::image_size(kPng), opt);
  const int64_t b_patches = image::patch_count(image::image_size(kJpeg), opt) +
                            image::patch_count(image::image_size(kGray), opt);
  EXPECT_EQ(src->image_positions(0), a_patches);
  EXPECT_EQ(src->image_positions(1), b_patches);
  const std::vector<int32_t> caption = encode_document(*byte, "two hoppers");
  ASSERT_EQ(src->length(1), b_patches + int64_t(caption.size()));

  src->prepare({0, 1, 2}, 2);
  EXPECT_GT(src->seconds_per_token(), 0.0);
  std::vector<int32_t> tokens;
  src->read(1, 0, src->length(1), &tokens);
  for (int64_t p = 0; p < b_patches; ++p) EXPECT_EQ(tokens[size_t(p)], model::kImagePosition);
  EXPECT_EQ(std::vector<int32_t>(tokens.begin() + b_patches, tokens.end()), caption);

  // Whole: lib/image's patches of both images, in order. Any range: its slice.
  const std::vector<float> whole = patches_of({kJpeg, kGray}, d);
  std::vector<float> got;
  src->read_patches(1, 0, src->length(1), &got);
  EXPECT_EQ(got, whole);
  const size_t P = size_t(3 * d.image.patch * d.image.patch);
  for (const auto& [offset, n] : std::vector<std::pair<int64_t, int64_t>>{
           {3, 7}, {b_patches - 2, 5}, {b_patches, 3}, {1, b_patches + 2}}) {
    got.clear();
    src->read_patches(1, offset, n, &got);
    const int64_t lo = std::min(offset, b_patches), hi = std::min(offset + n, b_patches);
    EXPECT_EQ(got,
              std::vector<float>(whole.begin() + lo * int64_t(P), whole.begin() + hi * int64_t(P)))
        << "range " << offset << "+" << n;
  }
}

TEST(ImageSource, DamagePastTheHeaderKeepsTheLengthWithBlankPatches) {
  TempDir dir;
  three_samples(dir);
  for (int64_t cache_mib : {256, 0}) {  // decoded once, or again on every read
    auto src = open_image_source(source_at(dir.file("s-000.tar")), data_config(cache_mib));
    const int64_t planned =
        image::patch_count(image::image_size(kJpeg), image_options(data_config().image));
    ASSERT_EQ(src->image_positions(2), planned);  // from the header
    std::vector<float> got;
    src->read_patches(2, 0, src->length(2), &got);
    ASSERT_EQ(got.size(), size_t(planned * 3 * 8 * 8));
    for (float v : got) ASSERT_EQ(v, 0.0f);
    // The other samples are untouched.
    got.clear();
    src->read_patches(0, 0, src->length(0), &got);
    EXPECT_EQ(got, patches_of({kPng}, data_config()));
  }
}

TEST(ImageSource, NoUsableSampleIsAnErrorNamingThePath) {
  TempDir dir;
  test::write_shard(dir.file("bad.tar"), {{"x.jpg", "not a jpeg"}, {"x.txt", "caption"}});
  try {
    open_image_source(source_at(dir.file("bad.tar")), data_config());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.tar' holds no image-text sample"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("bad.tar:x.jpg"), std::string::npos) << e.what();
  }
}

constexpr int kSamples = 8;

std::string caption(int64_t i) {
  std::string c = "caption number ";
  c += std::to_string(i);
  return c;
}

// kSamples samples alternating between a 320x200 JPEG and a 206x50 PNG.
struct Shard {
  TempDir dir;
  config::DataConfig data;
  config::SourceConfig source;
  Shard() {
    const std::string jpeg = test::test_image("wood_320x200.jpg"),
                      png = test::test_image("cats_dogs_rgba_206x50.png");
    test::Members m;
    for (int i = 0; i < kSamples; ++i) {
      std::string key = "s";
      key += std::to_string(i);
      m.push_back({key + (i % 2 ? ".png" : ".jpg"), i % 2 ? png : jpeg});
      m.push_back({key + ".txt", caption(i)});
    }
    test::write_shard(dir.file("s.tar"), m);
    data.image.max_side = 128;
    data.image.patch = 16;
    source.name = "images";
    source.path = dir.file("s.tar");
    source.format = config::SourceFormat::webdataset;
    source.tokenizer = "byte";
  }
  std::unique_ptr<DocSource> open() const { return open_image_source(source, data); }
};

std::vector<int64_t> all_docs() {
  std::vector<int64_t> docs(kSamples);
  std::iota(docs.begin(), docs.end(), 0);
  return docs;
}

TEST(ImageSource, LengthsNeedNoDecoding) {
  Shard shard;
  auto src = shard.open();
  ASSERT_EQ(src->docs(), kSamples);
  EXPECT_TRUE(src->prepare_lengths(all_docs(), 2));  // decoding is still to do
  EXPECT_EQ(src->decode_stats().decodes, 1);         // the calibration sample only
  EXPECT_GT(src->seconds_per_token(), 0.0);
  for (int64_t d = 0; d < kSamples; ++d) {
    // Patches from the header (at most 128 a side: 8x5 or 8x2 patches), then
    // the caption's bytes and the end-of-text id.
    EXPECT_EQ(src->image_positions(d), d % 2 ? 8 * 2 : 8 * 5) << d;
    EXPECT_EQ(src->length(d), src->image_positions(d) + int64_t(caption(d).size()) + 1) << d;
  }
  EXPECT_EQ(src->decode_stats().decodes, 1);  // length() decoded nothing
  src->prepare(all_docs(), 2);
  DocSource::DecodeStats s = src->decode_stats();
  EXPECT_EQ(s.decodes, kSamples);
  EXPECT_EQ(s.docs, kSamples);
  EXPECT_EQ(s.at_read, 0);
  EXPECT_GT(s.seconds, 0.0);
  std::vector<float> patches;
  src->read_patches(2, 0, src->length(2), &patches);
  EXPECT_EQ(patches.size(), size_t(src->image_positions(2)) * 16 * 16 * 3);
  EXPECT_EQ(src->decode_stats().at_read, 0);  // prepared: served from the decoded cache
}

TEST(ImageSource, PatchesAskedBeforePreparationAreDecodedAtReadTheSame) {
  Shard shard;
  auto ahead = shard.open(), late = shard.open();
  ahead->prepare(all_docs(), 1);
  ASSERT_TRUE(late->prepare_lengths({0, 1}, 1));
  for (int64_t d : {1, 4, 5}) {
    std::vector<float> a, b;
    ahead->read_patches(d, 0, ahead->length(d), &a);
    late->read_patches(d, 0, late->length(d), &b);
    EXPECT_EQ(a, b) << d;
  }
  const DocSource::DecodeStats s = late->decode_stats();
  EXPECT_EQ(s.at_read, 3);  // 1, 4 and 5
  EXPECT_EQ(s.decodes, 4);  // and 0, the calibration sample of prepare_lengths
  EXPECT_EQ(ahead->decode_stats().at_read, 0);
}

TEST(ImageSource, MeasuredCostGivesTheLoadersToImagesNotText) {
  Shard shard;
  auto images = shard.open();
  images->prepare_lengths(all_docs(), 1);
  images->prepare(all_docs(), 1);
  // A raw text source of the same mixture weight, byte-tokenized.
  config::Config config;
  test::write_file(shard.dir.file("text.jsonl"),
                   "{\"text\": \"" + std::string(4000, 'a') + "\"}\n{\"text\": \"b c d\"}\n");
  config::SourceConfig text;
  text.name = "text";
  text.path = shard.dir.file("text.jsonl");
  text.format = config::SourceFormat::jsonl;
  text.tokenizer = "byte";
  config.data.sources = {text};
  auto raw = open_doc_source(config, 0);
  raw->prepare({0, 1}, 1);
  const double text_cost = raw->seconds_per_token(), image_cost = images->seconds_per_token();
  ASSERT_GT(text_cost, 0.0);
  EXPECT_GT(image_cost, 10 * text_cost) << "decoding an image costs more per position than "
                                           "byte-tokenizing text";
  for (int loaders : {3, 4, 8}) {
    const dataplane::LoaderAssignment a =
        dataplane::assign_loaders(loaders, {1.0, 1.0}, {text_cost, image_cost});
    EXPECT_EQ(a.loaders_of_source[0].size(), 1u) << loaders;
    EXPECT_EQ(a.loaders_of_source[1].size(), size_t(loaders - 1)) << loaders;
  }
}

}  // namespace
}  // namespace meshloom
