// The image-text source as a loader drives it: a length request needs only
// the image headers and the captions (one calibration decode, so that the
// reply carries a decoding cost), decoding comes with prepare() and is
// counted, patches asked for before that are decoded at read (and counted),
// and the measured cost gives the image source more loaders than a text
// source of the same mixture weight.
#include "roles/image_source.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>

#include <fstream>
#include <numeric>
#include <sstream>

#include "dataplane/partition.hpp"
#include "tests/common/test_util.hpp"

namespace meshloom {
namespace {

using Members = std::vector<std::pair<std::string, std::string>>;
using test::TempDir;

std::string image(const std::string& name) {
  std::ifstream in(std::string(MESHLOOM_SOURCE_DIR) + "/tests/data/images/" + name,
                   std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

void write_shard(const std::string& path, const Members& members) {
  struct archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  ASSERT_EQ(archive_write_open_filename(a, path.c_str()), ARCHIVE_OK) << archive_error_string(a);
  for (const auto& [name, content] : members) {
    struct archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, name.c_str());
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_size(e, static_cast<la_int64_t>(content.size()));
    ASSERT_EQ(archive_write_header(a, e), ARCHIVE_OK) << archive_error_string(a);
    archive_write_data(a, content.data(), content.size());
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
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
    const std::string jpeg = image("wood_320x200.jpg"), png = image("cats_dogs_rgba_206x50.png");
    Members m;
    for (int i = 0; i < kSamples; ++i) {
      std::string key = "s";
      key += std::to_string(i);
      m.push_back({key + (i % 2 ? ".png" : ".jpg"), i % 2 ? png : jpeg});
      m.push_back({key + ".txt", caption(i)});
    }
    write_shard(dir.file("s.tar"), m);
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
