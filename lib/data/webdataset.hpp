// WebDataset shards: tar archives (plain or compressed) whose members form
// image-text samples grouped by key.
//
// A member's key is its path up to the first '.' of its base name, the rest
// its extension ("a/b/0001.0.jpg": key "a/b/0001", extension "0.jpg"), as in
// the webdataset library. A sample is a run of consecutive members with one
// key inside one shard:
//   KEY.jpg | KEY.jpeg | KEY.png            the sample's image
//   KEY.N.jpg | KEY.N.jpeg | KEY.N.png      several images, in order of N
//   KEY.txt                                 the caption (UTF-8; repaired, counted)
//   KEY.json                                the caption is its "caption" or
//                                           "text" string, if there is no .txt
// Extensions are compared without case. A sample's length is the patches of
// its images (image::patch_count, from the headers) plus its caption's tokens.
//
// Bad input never stops the reader and is never dropped silently: each case is
// counted in WebDatasetReport and the first few are named, shard and member:
//   - an image that is corrupt, truncated, of more than max_pixels pixels, or
//     not JPEG/PNG inside (the sample is skipped)
//   - a member of another format (.gif, .bmp, .webp, .cls, ...): skipped; the
//     sample keeps its other members
//   - an image without caption, a caption without image, a .json without a
//     caption string (the sample is skipped)
//   - a repeated member (two KEY.txt): the later one is skipped
//   - unreadable archives and empty members, as the tar reader reports them
// Only an input named by the caller that does not exist, a pattern that
// matches nothing, or a named file that is no archive throws meshloom::Error.
//
// With decode = false the reader checks images from their headers only
// (sizes, max_pixels): what the lead needs for lengths. With decode = true it
// decodes and cuts patches, which also finds damage past the header.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/documents.hpp"
#include "image/patches.hpp"

namespace meshloom::data {

struct WebDatasetOptions {
  image::ImageOptions image;
  bool decode = false;  // false: headers only; true: fill ImageTextSample::patches
  uint64_t max_member_bytes = uint64_t{256} << 20;  // larger members: problems
  size_t max_named_problems = 5;
};

struct ImageTextSample {
  std::string name;                     // "shard.tar:KEY"
  std::vector<std::string> images;      // encoded bytes, in order
  std::vector<image::ImageSize> sizes;  // from the headers, one per image
  std::vector<image::Patches> patches;  // one per image when decoding, else empty
  std::string caption;
  int64_t image_patches = 0;  // sum of patch_count over the images
};

struct WebDatasetReport {
  uint64_t samples = 0;  // delivered
  uint64_t images = 0;   // in delivered samples
  // Images skipped (their samples with them).
  uint64_t corrupt_images = 0;
  uint64_t truncated_images = 0;
  uint64_t too_large_images = 0;    // over max_pixels
  uint64_t unsupported_images = 0;  // a .jpg/.png holding neither JPEG nor PNG, CMYK JPEG
  // Members skipped.
  uint64_t unsupported_members = 0;  // other extensions
  uint64_t duplicate_members = 0;
  // Samples skipped.
  uint64_t images_without_caption = 0;
  uint64_t captions_without_image = 0;
  uint64_t bad_captions = 0;           // .json without a caption string, or not JSON
  uint64_t invalid_utf8_captions = 0;  // repaired, not skipped
  // From the tar reader.
  uint64_t unreadable = 0;            // archives or members it could not read
  uint64_t empty_members = 0;         // skipped as empty (their samples then lack them)
  std::vector<std::string> problems;  // the first few, "shard.tar:member: reason"
  size_t max_named_problems = 5;

  // Counts one problem in *counter and names it while fewer than the limit are.
  void add_problem(uint64_t* counter, const std::string& name, const std::string& reason);
  uint64_t skipped_samples() const;
  // "12 samples, 14 images; skipped: 1 corrupt image, 2 images without caption"
  std::string summary() const;
};

// The inputs: shard files, folders of shards, or glob(3) patterns of shards
// ("shards/train-*.tar"; no {000..009} ranges), expanded in sorted order.
// Throws Error naming a pattern that matches nothing.
std::vector<std::string> expand_shard_patterns(const std::vector<std::string>& inputs);

class WebDatasetReader {
 public:
  // Throws Error like DocumentReader (an input that does not exist).
  WebDatasetReader(const std::vector<std::string>& inputs, WebDatasetOptions options);
  ~WebDatasetReader();

  // The next good sample, or false at the end.
  bool next(ImageTextSample* sample);

  // The report, with the tar reader's own problems (unreadable archives, empty
  // members) merged in.
  WebDatasetReport report() const;

 private:
  struct Member;
  bool read_member(Member* member);
  bool finish_group(ImageTextSample* sample);

  WebDatasetOptions options_;
  DocumentReader tar_;
  WebDatasetReport report_;
  // The group being collected: its shard and key, its members.
  std::string shard_, key_;
  std::vector<std::unique_ptr<Member>> group_;
  std::unique_ptr<Member> pending_;  // read ahead: the first member of the next group
  bool exhausted_ = false;
};

}  // namespace meshloom::data
