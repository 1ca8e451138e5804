#include "sources/image_source.hpp"

#include <algorithm>
#include <atomic>
#include <mutex>

#include "base/check.hpp"
#include "base/clock.hpp"
#include "base/log.hpp"
#include "base/strings.hpp"
#include "image/patches.hpp"
#include "model/batch.hpp"
#include "sources/bounded_cache.hpp"
#include "sources/worker_pool.hpp"
#include "tokenizer/tokenizer.hpp"

namespace meshloom::sources {

image::ImageOptions image_options(const config::ImageConfig& image) {
  image::ImageOptions o;
  o.max_side = int(image.max_side);
  o.patch = int(image.patch);
  o.max_pixels = uint64_t(image.max_pixels);
  return o;
}

namespace {

constexpr int kNamedDamaged = 5;  // damaged images named in the log, per source

// A sample's images decoded and fitted; an empty image failed to decode.
struct DecodedSample {
  std::vector<image::RgbImage> images;
  int64_t bytes() const {
    int64_t n = 0;
    for (const auto& i : images) n += int64_t(i.pixels.size());
    return n;
  }
};

class ImageTextSource final : public DocSource {
 public:
  ImageTextSource(const config::SourceConfig& source, const config::DataConfig& data)
      : name_(source.name),
        options_(image_options(data.image)),
        tokenizer_(tokenizer::make_tokenizer(source.tokenizer)),
        captions_(data.cache_tokens),
        decoded_(data.image.cache_mib << 20) {
    data::WebDatasetOptions opt;
    opt.image = options_;
    data::WebDatasetReader reader({source.path}, opt);
    data::ImageTextSample s;
    while (reader.next(&s)) {
      Sample sample;
      sample.name = s.name;
      sample.first_image = int64_t(images_.size());
      for (size_t i = 0; i < s.images.size(); ++i) {
        images_.push_back({int64_t(arena_.size()), int64_t(s.images[i].size()),
                           image::patch_count(s.sizes[i], options_)});
        arena_ += s.images[i];
        sample.patches += images_.back().patches;
      }
      sample.images = int64_t(s.images.size());
      sample.caption_begin = int64_t(arena_.size());
      sample.caption_bytes = int64_t(s.caption.size());
      arena_ += s.caption;
      samples_.push_back(std::move(sample));
    }
    decodes_of_.assign(samples_.size(), 0);
    if (samples_.empty()) {
      const data::WebDatasetReport r = reader.report();
      throw Error("'" + source.path + "' holds no image-text sample: " + r.summary() +
                  (r.problems.empty() ? "" : " (first: " + r.problems.front() + ")"));
    }
  }

  DecodeStats decode_stats() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    DecodeStats d;
    for (int32_t n : decodes_of_) {
      d.docs += n > 0;
      d.decodes += n;
    }
    d.at_read = read_misses_.load();
    d.seconds = decode_seconds_;
    return d;
  }

  int64_t docs() const override { return int64_t(samples_.size()); }
  int64_t length(int64_t doc) override { return at(doc).patches + int64_t(caption(doc)->size()); }
  int64_t image_positions(int64_t doc) override { return at(doc).patches; }

  void read(int64_t doc, int64_t offset, int64_t n, std::vector<int32_t>* out) override {
    const int64_t images = at(doc).patches;
    const auto text = caption(doc);
    ML_CHECK(offset >= 0 && n >= 0 && offset + n <= images + int64_t(text->size()),
             "token range past the document");
    out->reserve(out->size() + size_t(n));
    for (int64_t p = offset; p < offset + n; ++p)
      out->push_back(p < images ? model::kImagePosition : (*text)[size_t(p - images)]);
  }

  void read_patches(int64_t doc, int64_t offset, int64_t n, std::vector<float>* out) override {
    const Sample& s = at(doc);
    const int64_t end = std::min(offset + n, s.patches);
    if (offset >= end) return;
    const size_t per_patch = size_t(options_.patch) * size_t(options_.patch) * 3;
    const auto pixels = decoded(doc, true);
    int64_t first = 0;  // the image's first position in the document
    for (int64_t i = 0; i < s.images; ++i) {
      const int64_t count = images_[size_t(s.first_image + i)].patches;
      const int64_t lo = std::max(offset, first), hi = std::min(end, first + count);
      if (lo < hi) {
        const image::RgbImage& img = pixels->images[size_t(i)];
        if (img.pixels.empty()) {
          out->insert(out->end(), size_t(hi - lo) * per_patch, 0.0f);  // damaged: blank
        } else {
          const image::Patches p = image::cut_patches(img, options_.patch);
          out->insert(out->end(), p.values.begin() + (lo - first) * int64_t(per_patch),
                      p.values.begin() + (hi - first) * int64_t(per_patch));
        }
      }
      first += count;
    }
  }

  // Captions only; the images are decoded later (prepare). The first call
  // also decodes one sample, so that the first length reply already carries
  // a decoding cost (seconds_per_token).
  bool prepare_lengths(const std::vector<int64_t>& docs, int threads) override {
    std::vector<int64_t> missing;
    for (int64_t d : docs)
      if (!captions_.contains(d)) missing.push_back(d);
    run_on_workers(missing.size(), threads, [&](size_t i) { caption(missing[i]); });
    bool measured;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      measured = decoded_patches_ > 0;
    }
    if (!measured)
      for (int64_t d : docs)
        if (at(d).patches > 0) {
          decoded(d);
          break;
        }
    return true;
  }

  void prepare(const std::vector<int64_t>& docs, int threads) override {
    std::vector<int64_t> missing;
    for (int64_t d : docs)
      if (!decoded_.contains(d) || !captions_.contains(d)) missing.push_back(d);
    run_on_workers(missing.size(), threads, [&](size_t i) {
      caption(missing[i]);
      decoded(missing[i]);
    });
  }

  // The cost of preparing the samples whose lengths were asked, per
  // position: their captions' measured tokenizing time plus their patches at
  // the measured decoding time per patch (decoding comes after the length
  // reply, so most of them are not decoded yet). 0 (unknown) until a sample
  // was decoded: captions alone would make the source look as cheap as text.
  double seconds_per_token() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (decoded_patches_ == 0 || caption_tokens_ + caption_patches_ == 0) return 0.0;
    const double per_patch = decode_seconds_ / double(decoded_patches_);
    return (caption_seconds_ + per_patch * double(caption_patches_)) /
           double(caption_tokens_ + caption_patches_);
  }

 private:
  struct Image {
    int64_t begin = 0, bytes = 0;  // in arena_
    int64_t patches = 0;           // from the header's size
  };
  struct Sample {
    std::string name;  // "shard.tar:KEY"
    int64_t first_image = 0, images = 0;
    int64_t patches = 0;  // over its images
    int64_t caption_begin = 0, caption_bytes = 0;
  };

  const Sample& at(int64_t doc) const {
    ML_CHECK(doc >= 0 && doc < docs(), "document index out of range");
    return samples_[size_t(doc)];
  }

  BoundedCache<std::vector<int32_t>>::Value caption(int64_t doc) {
    if (auto hit = captions_.find(doc)) return hit;
    const Sample& s = at(doc);
    const auto start = Clock::now();
    auto ids = std::make_shared<const std::vector<int32_t>>(encode_document(
        *tokenizer_,
        std::string_view(arena_).substr(size_t(s.caption_begin), size_t(s.caption_bytes))));
    {
      std::lock_guard<std::mutex> lock(mutex_);
      caption_seconds_ += seconds_since(start);
      caption_tokens_ += int64_t(ids->size());
      caption_patches_ += s.patches;
    }
    return captions_.insert(doc, ids, int64_t(ids->size()));
  }

  BoundedCache<DecodedSample>::Value decoded(int64_t doc, bool at_read = false) {
    if (auto hit = decoded_.find(doc)) return hit;
    if (at_read) ++read_misses_;
    const Sample& s = at(doc);
    const auto start = Clock::now();
    auto out = std::make_shared<DecodedSample>();
    for (int64_t i = 0; i < s.images; ++i) {
      const Image& img = images_[size_t(s.first_image + i)];
      const std::string_view bytes =
          std::string_view(arena_).substr(size_t(img.begin), size_t(img.bytes));
      try {
        out->images.push_back(image::decode_fitted(bytes, options_));
        const image::PatchGrid grid = image::patch_grid(out->images.back().size, options_.patch);
        if (int64_t(grid.rows) * grid.cols != img.patches)
          throw image::ImageError(image::ImageProblem::kCorrupt,
                                  "its size differs from its header's");
      } catch (const image::ImageError& e) {
        out->images.resize(size_t(i) + 1);
        out->images.back() = {};
        damaged(s, i, e.what());
      }
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++decodes_of_[size_t(doc)];
      decode_seconds_ += seconds_since(start);
      decoded_patches_ += s.patches;
    }
    std::shared_ptr<const DecodedSample> value = std::move(out);
    return decoded_.insert(doc, value, value->bytes());
  }

  // Counted, and named while few: its positions get blank patches.
  void damaged(const Sample& s, int64_t image, const char* reason) {
    const int64_t n = ++damaged_;
    if (n <= kNamedDamaged)
      LOG_WARN(
          "source '%s': %s image %lld passed the header check but does not decode (%s): its "
          "%lld patches are blank (0.0)%s",
          name_.c_str(), s.name.c_str(), (long long)image, reason,
          (long long)images_[size_t(s.first_image + image)].patches,
          n == kNamedDamaged ? "; further damaged images are counted, not named" : "");
  }

  std::string name_;
  image::ImageOptions options_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  std::string arena_;  // encoded images and captions
  std::vector<Image> images_;
  std::vector<Sample> samples_;
  BoundedCache<std::vector<int32_t>> captions_;
  BoundedCache<DecodedSample> decoded_;
  mutable std::mutex mutex_;  // the cost counters
  double caption_seconds_ = 0;
  int64_t caption_tokens_ = 0, caption_patches_ = 0;  // of the samples whose captions were made
  double decode_seconds_ = 0;
  int64_t decoded_patches_ = 0;
  std::vector<int32_t> decodes_of_;  // per sample
  std::atomic<int64_t> damaged_{0};
  std::atomic<int64_t> read_misses_{0};
};

}  // namespace

std::unique_ptr<DocSource> open_image_source(const config::SourceConfig& source,
                                             const config::DataConfig& data) {
  return std::make_unique<ImageTextSource>(source, data);
}

data::WebDatasetReport scan_image_source(const config::SourceConfig& source,
                                         const config::ImageConfig& image) {
  data::WebDatasetOptions opt;
  opt.image = image_options(image);
  data::WebDatasetReader reader({source.path}, opt);
  data::ImageTextSample s;
  while (reader.next(&s)) {
  }
  return reader.report();
}

}  // namespace meshloom::sources
