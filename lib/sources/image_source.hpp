// An image-text source (format: webdataset, data/webdataset.hpp) as a loader
// serves it.
//
// Opening reads every shard once and checks each image from its header only
// (size, data.image.max_pixels), keeping the encoded bytes and the caption:
// the source's state, as a raw text source keeps its text. A sample's
// document is its images' patches, in order (token model::kImagePosition),
// then its caption's tokens and the end-of-text id, so length() needs no
// decoding: prepare_lengths() tokenizes captions only. prepare(), which the
// loader runs when idle after answering the lengths, decodes and resizes the
// images on its worker threads and keeps them as 8-bit RGB in a cache of
// data.image.cache_mib; read_patches() cuts the patches from there
// (image/patches.hpp), decoding what is not cached.
//
// An image whose header is sound but whose data is damaged further on (a
// truncated or corrupt JPEG body) cannot change the length already planned:
// its positions get blank patches (0.0, the normalized mid-grey), and the
// loader counts it and names the first few in its log. Decoding the same
// bytes always fails the same way, so batches do not depend on the loader.
#pragma once

#include <memory>

#include "config/config.hpp"
#include "data/webdataset.hpp"
#include "sources/doc_source.hpp"

namespace meshloom::sources {

image::ImageOptions image_options(const config::ImageConfig& image);

// Throws Error naming the path when the shards hold no usable sample.
std::unique_ptr<DocSource> open_image_source(const config::SourceConfig& source,
                                             const config::DataConfig& data);

// The shards read once from their headers: what check_sources reports.
data::WebDatasetReport scan_image_source(const config::SourceConfig& source,
                                         const config::ImageConfig& image);

}  // namespace meshloom::sources
