// WebDataset shards through DocumentReader's tar reader (members as raw bytes),
// grouped into samples here.
#include "data/webdataset.hpp"

#include <glob.h>

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "base/strings.hpp"
#include "base/utf8.hpp"

namespace meshloom::data {
namespace {

bool is_pattern(const std::string& input) {
  return input.find_first_of("*?[") != std::string::npos;
}

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool is_image_extension(const std::string& ext) {
  return ext == "jpg" || ext == "jpeg" || ext == "png";
}

// "jpg" -> -1 (the one image), "3.png" -> 3, anything else -> -2.
constexpr int kNotAnImage = -2;
int image_index(const std::string& ext) {
  if (is_image_extension(ext)) return -1;
  const size_t dot = ext.find('.');
  if (dot == std::string::npos || dot == 0 || dot > 6) return kNotAnImage;
  if (!std::all_of(ext.begin(), ext.begin() + dot, [](char c) { return std::isdigit(c); }))
    return kNotAnImage;
  return is_image_extension(ext.substr(dot + 1)) ? std::stoi(ext.substr(0, dot)) : kNotAnImage;
}

std::string plural(uint64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

struct WebDatasetReader::Member {
  std::string name;   // "shard.tar:member"
  std::string shard;  // "shard.tar"
  std::string key;    // the member path up to its base name's first '.'
  std::string ext;    // the rest, lower case
  std::string bytes;
};

void WebDatasetReport::add_problem(uint64_t* counter, const std::string& name,
                                   const std::string& reason) {
  ++*counter;
  if (problems.size() < max_named_problems) problems.push_back(name + ": " + reason);
}

uint64_t WebDatasetReport::skipped_samples() const {
  return corrupt_images + truncated_images + too_large_images + unsupported_images +
         images_without_caption + captions_without_image + bad_captions;
}

std::string WebDatasetReport::summary() const {
  std::string s = plural(samples, "sample", "samples") + ", " + plural(images, "image", "images");
  std::vector<std::string> skipped;
  const auto add = [&](uint64_t n, const char* one, const char* many) {
    if (n > 0) skipped.push_back(plural(n, one, many));
  };
  add(corrupt_images, "corrupt image", "corrupt images");
  add(truncated_images, "truncated image", "truncated images");
  add(too_large_images, "image over max_pixels", "images over max_pixels");
  add(unsupported_images, "image neither JPEG nor PNG", "images neither JPEG nor PNG");
  add(images_without_caption, "image without caption", "images without caption");
  add(captions_without_image, "caption without image", "captions without image");
  add(bad_captions, "bad .json caption", "bad .json captions");
  add(unsupported_members, "member of an unsupported format", "members of unsupported formats");
  add(duplicate_members, "repeated member", "repeated members");
  add(unreadable, "unreadable archive or member", "unreadable archives or members");
  add(empty_members, "empty member", "empty members");
  if (!skipped.empty()) s += "; skipped: " + join(skipped, ", ");
  if (invalid_utf8_captions > 0)
    s += "; " + plural(invalid_utf8_captions, "caption", "captions") +
         " with invalid UTF-8 repaired";
  return s;
}

std::vector<std::string> expand_shard_patterns(const std::vector<std::string>& inputs) {
  std::vector<std::string> out;
  for (const std::string& input : inputs) {
    if (!is_pattern(input)) {
      out.push_back(input);
      continue;
    }
    glob_t g{};
    const int r = glob(input.c_str(), 0, nullptr, &g);  // sorted
    if (r == 0)
      for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
    globfree(&g);
    if (r == GLOB_NOMATCH) throw Error(input + ": no shard matches this pattern");
    if (r != 0) throw Error(input + ": cannot expand this pattern");
  }
  return out;
}

namespace {
ReaderOptions tar_options(const WebDatasetOptions& options) {
  ReaderOptions r;
  r.format = config::SourceFormat::tar;
  r.fix_utf8 = false;  // members are images; captions are repaired here
  r.max_document_bytes = options.max_member_bytes;
  r.max_named_problems = options.max_named_problems;
  return r;
}
}  // namespace

WebDatasetReader::WebDatasetReader(const std::vector<std::string>& inputs,
                                   WebDatasetOptions options)
    : options_(std::move(options)), tar_(expand_shard_patterns(inputs), tar_options(options_)) {
  report_.max_named_problems = options_.max_named_problems;
}

WebDatasetReader::~WebDatasetReader() = default;

bool WebDatasetReader::read_member(Member* member) {
  Document doc;
  if (!tar_.next(&doc)) return false;
  member->name = std::move(doc.name);
  member->shard = member->name.substr(0, member->name.size() - doc.member.size() - 1);
  const size_t base = doc.member.rfind('/') + 1;  // npos + 1 == 0
  const size_t dot = doc.member.find('.', base);
  member->key = doc.member.substr(0, dot);
  member->ext = dot == std::string::npos ? "" : lower(doc.member.substr(dot + 1));
  member->bytes = std::move(doc.text);
  return true;
}

bool WebDatasetReader::next(ImageTextSample* sample) {
  while (!exhausted_) {
    std::unique_ptr<Member> member = std::move(pending_);
    if (!member) {
      member = std::make_unique<Member>();
      if (!read_member(member.get())) {
        exhausted_ = true;
        break;
      }
    }
    if (!group_.empty() && (member->shard != shard_ || member->key != key_)) {
      pending_ = std::move(member);
      if (finish_group(sample)) return true;
      continue;
    }
    if (group_.empty()) {
      shard_ = member->shard;
      key_ = member->key;
    }
    group_.push_back(std::move(member));
  }
  return !group_.empty() && finish_group(sample);
}

// Turns the collected group into *sample; false (and counted) if it is skipped.
bool WebDatasetReader::finish_group(ImageTextSample* sample) {
  std::vector<std::unique_ptr<Member>> group = std::move(group_);
  group_.clear();
  std::vector<std::pair<int, const Member*>> images;
  const Member* txt = nullptr;
  const Member* json = nullptr;
  const auto take_once = [&](const Member** slot, const Member* m) {
    if (*slot != nullptr)
      report_.add_problem(&report_.duplicate_members, m->name, "a repeated member, skipped");
    else
      *slot = m;
  };
  for (const auto& m : group) {
    const int index = image_index(m->ext);
    if (index != kNotAnImage) {
      const bool repeated = std::any_of(images.begin(), images.end(),
                                        [&](const auto& image) { return image.first == index; });
      if (repeated)
        report_.add_problem(&report_.duplicate_members, m->name, "a repeated image, skipped");
      else
        images.emplace_back(index, m.get());
    } else if (m->ext == "txt") {
      take_once(&txt, m.get());
    } else if (m->ext == "json") {
      take_once(&json, m.get());
    } else {
      report_.add_problem(&report_.unsupported_members, m->name,
                          "unsupported member format \"." + m->ext +
                              "\" (images: .jpg, .jpeg, .png; captions: .txt, .json), skipped");
    }
  }
  std::sort(images.begin(), images.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });

  const Member* caption_member = txt != nullptr ? txt : json;
  if (images.empty()) {
    if (caption_member != nullptr)
      report_.add_problem(&report_.captions_without_image, caption_member->name,
                          "a caption without image, sample skipped");
    return false;
  }
  if (caption_member == nullptr) {
    report_.add_problem(&report_.images_without_caption, images.front().second->name,
                        "an image without caption (.txt or .json), sample skipped");
    return false;
  }

  ImageTextSample s;
  s.name = shard_ + ":" + key_;
  if (txt != nullptr) {
    s.caption = txt->bytes;
  } else {
    const nlohmann::json j = nlohmann::json::parse(json->bytes, nullptr, false);
    const nlohmann::json* field = nullptr;
    if (j.is_object())
      for (const char* key : {"caption", "text"})
        if (j.contains(key) && j[key].is_string()) {
          field = &j[key];
          break;
        }
    if (field == nullptr) {
      report_.add_problem(&report_.bad_captions, json->name,
                          j.is_discarded() ? "not valid JSON, sample skipped"
                                           : "no string \"caption\" or \"text\", sample skipped");
      return false;
    }
    s.caption = field->get<std::string>();
  }

  for (const auto& [index, m] : images) {
    try {
      const image::ImageSize size = image::image_size(m->bytes);
      if (size.pixels() > options_.image.max_pixels)
        throw image::ImageError(
            image::ImageProblem::kTooLarge,
            strf("%dx%d is more than the %llu pixels allowed (data.image.max_pixels)", size.width,
                 size.height, static_cast<unsigned long long>(options_.image.max_pixels)));
      if (options_.decode) s.patches.push_back(image::image_to_patches(m->bytes, options_.image));
      s.sizes.push_back(size);
      s.image_patches += image::patch_count(size, options_.image);
    } catch (const image::ImageError& e) {
      uint64_t* counter = nullptr;
      switch (e.kind) {
        case image::ImageProblem::kCorrupt:
          counter = &report_.corrupt_images;
          break;
        case image::ImageProblem::kTruncated:
          counter = &report_.truncated_images;
          break;
        case image::ImageProblem::kTooLarge:
          counter = &report_.too_large_images;
          break;
        case image::ImageProblem::kUnsupported:
          counter = &report_.unsupported_images;
          break;
      }
      report_.add_problem(counter, m->name,
                          std::string(image::image_problem_name(e.kind)) + " image (" + e.what() +
                              "), sample skipped");
      return false;
    }
    s.images.push_back(m->bytes);
  }
  if (sanitize_utf8(&s.caption) > 0) ++report_.invalid_utf8_captions;
  ++report_.samples;
  report_.images += s.images.size();
  *sample = std::move(s);
  return true;
}

WebDatasetReport WebDatasetReader::report() const {
  WebDatasetReport r = report_;
  const InputReport& tar = tar_.report();
  r.unreadable = tar.unreadable;
  r.empty_members = tar.empty;
  for (const std::string& p : tar.problems)
    if (r.problems.size() < r.max_named_problems) r.problems.push_back(p);
  return r;
}

}  // namespace meshloom::data
