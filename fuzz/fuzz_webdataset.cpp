// The WebDataset reader (lib/data/webdataset over the tar reader and
// lib/image): the input is one shard. Checks: every delivered sample has an
// image, a size and patches per image and a valid UTF-8 caption; the report
// counts what was delivered; an Error names the shard.
#include "base/utf8.hpp"
#include "data/webdataset.hpp"
#include "fuzz/harness.hpp"

using namespace meshloom;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::init();
  const std::string path = fuzz::write_file("shard.tar", fuzz::bytes(data, size));
  data::WebDatasetOptions options;
  options.decode = true;
  options.image.max_side = 48;
  options.image.max_pixels = 1 << 20;  // what the input can justify: no 4 GB canvases
  options.max_member_bytes = uint64_t{1} << 20;
  try {
    data::WebDatasetReader reader({path}, options);
    data::ImageTextSample sample;
    uint64_t samples = 0, images = 0;
    while (reader.next(&sample)) {
      ++samples;
      images += sample.images.size();
      if (sample.images.empty()) fuzz::finding("a sample without an image: " + sample.name);
      if (sample.sizes.size() != sample.images.size() ||
          sample.patches.size() != sample.images.size())
        fuzz::finding("sizes or patches do not match the images of " + sample.name);
      if (valid_utf8_prefix(sample.caption) != sample.caption.size())
        fuzz::finding("a caption with invalid UTF-8 was delivered: " + sample.name);
      if (sample.name.find("shard.tar") == std::string::npos)
        fuzz::finding("a sample whose name does not name its shard: " + sample.name);
    }
    const data::WebDatasetReport r = reader.report();
    if (r.samples != samples || r.images != images)
      fuzz::finding("the report does not count what was delivered");
  } catch (const Error& e) {
    fuzz::expect_names(e, {path});
  }
  return 0;
}
