#include "sources/doc_source.hpp"

#include <chrono>
#include <filesystem>
#include <mutex>

#include "base/check.hpp"
#include "base/clock.hpp"
#include "base/log.hpp"
#include "base/strings.hpp"
#include "data/documents.hpp"
#include "data/indexed_dataset.hpp"
#include "sources/bounded_cache.hpp"
#include "sources/image_source.hpp"
#include "sources/worker_pool.hpp"
#include "tokenizer/tokenizer.hpp"

namespace meshloom::sources {
namespace {

// Why a raw source delivered no document: "3 unreadable (first: f.jsonl:1:
// not valid JSON), 1 empty".
std::string why_no_document(const data::InputReport& r) {
  std::string why = strf("%llu unreadable", (unsigned long long)r.unreadable);
  if (!r.problems.empty()) why += " (first: " + r.problems.front() + ")";
  return why + strf(", %llu empty", (unsigned long long)r.empty);
}

// A bad token id; its message already names the source.
struct TokenError : Error {
  using Error::Error;
};

class IndexedDocSource final : public DocSource {
 public:
  // vocab_size > 0: every token read must lie in [0, vocab_size).
  IndexedDocSource(const std::string& name, const std::string& prefix, int64_t vocab_size)
      : name_(name), ds_(prefix), vocab_(vocab_size) {
    if (ds_.size() == 0) throw Error("indexed dataset '" + prefix + "' has no documents");
    // The data plane needs a token to deliver; an all-empty source would fail mid-run.
    if (ds_.num_tokens() == 0)
      throw Error(
          strf("indexed dataset '%s' holds %zu documents, all empty", prefix.c_str(), ds_.size()));
    // Its preparation cost is reading tokens out of the mapped file: measure
    // it once on the first documents, so it compares with raw sources'.
    const auto start = std::chrono::steady_clock::now();
    std::vector<int32_t> scratch;
    for (size_t i = 0; i < ds_.size() && scratch.size() < (size_t(1) << 16); ++i)
      read(int64_t(i), 0, ds_.length(i), &scratch);
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    cost_ = scratch.empty() ? 1e-9 : std::max(1e-10, took / double(scratch.size()));
  }
  double seconds_per_token() const override { return cost_; }
  int64_t docs() const override { return int64_t(ds_.size()); }
  int64_t length(int64_t doc) override { return ds_.length(size_t(doc)); }
  void read(int64_t doc, int64_t offset, int64_t n, std::vector<int32_t>* out) override {
    data::TokenView v = ds_.tokens(size_t(doc));
    ML_CHECK(offset >= 0 && offset + n <= int64_t(v.size), "token range past the document");
    out->reserve(out->size() + size_t(n));
    // The ids are checked here, on the tokens read anyway: a corrupt .bin or
    // a vocabulary too small is named now, not as a trainer's internal check.
    int64_t lo = 0, hi = 0;
    for (int64_t k = 0; k < n; ++k) {
      const int64_t t = v[size_t(offset + k)];
      lo = std::min(lo, t);
      hi = std::max(hi, t);
      out->push_back(int32_t(t));
    }
    if (vocab_ > 0 && (lo < 0 || hi >= vocab_))
      throw TokenError(
          strf("source '%s' (%s) document %lld: token %lld is outside model.vocab_size %lld",
               name_.c_str(), data::bin_path(ds_.prefix()).c_str(), (long long)doc,
               (long long)(lo < 0 ? lo : hi), (long long)vocab_));
  }

 private:
  std::string name_;
  data::IndexedDataset ds_;
  int64_t vocab_;
  double cost_ = 0;
};

// A tokenized document as the raw sources' cache keeps it: 2 bytes per id
// when the vocabulary fits (GPT-2's 50,257 ids do; Megatron's .bin does the
// same), else 4. The cache is most of a loader's memory beyond the text.
class CachedTokens {
 public:
  CachedTokens(std::vector<int32_t> ids, bool narrow) {
    if (narrow)
      narrow_.assign(ids.begin(), ids.end());
    else
      wide_ = std::move(ids);
  }
  int64_t size() const { return int64_t(narrow_.empty() ? wide_.size() : narrow_.size()); }
  void append(int64_t offset, int64_t n, std::vector<int32_t>* out) const {
    ML_CHECK(offset >= 0 && n >= 0 && offset + n <= size(), "token range past the document");
    if (narrow_.empty())
      out->insert(out->end(), wide_.begin() + offset, wide_.begin() + offset + n);
    else
      out->insert(out->end(), narrow_.begin() + offset, narrow_.begin() + offset + n);
  }

 private:
  std::vector<uint16_t> narrow_;
  std::vector<int32_t> wide_;
};

// Raw text (a folder of text files, JSON Lines, tar archives) tokenized on
// the fly. Opening reads every document's text into one arena (the source's
// state: what a per-rank data loader holds, once per rank); tokens are made on
// demand, on the loader's worker threads, and kept in a bounded LRU cache so
// the length the lead asks for and the tokens fetched next cost one
// tokenization. Each document gets the tokenizer's end-of-text id appended,
// as `meshloom prepare` does, so a raw source and its prepared twin deliver
// the same tokens.
class RawDocSource final : public DocSource {
 public:
  RawDocSource(const config::SourceConfig& source, int64_t cache_tokens)
      : tokenizer_(tokenizer::make_tokenizer(source.tokenizer)),
        narrow_(tokenizer_->vocab_size() <= 65536),
        cache_(cache_tokens) {
    data::ReaderOptions opt;
    opt.format = source.format;
    data::DocumentReader reader({source.path}, opt);
    data::Document doc;
    while (reader.next(&doc)) {
      offsets_.push_back(int64_t(arena_.size()));
      arena_ += doc.text;
    }
    offsets_.push_back(int64_t(arena_.size()));
    if (docs() == 0)
      throw Error("'" + source.path + "' holds no document: " + why_no_document(reader.report()));
  }
  int64_t docs() const override { return int64_t(offsets_.size()) - 1; }
  int64_t length(int64_t doc) override { return tokens(doc)->size(); }
  void read(int64_t doc, int64_t offset, int64_t n, std::vector<int32_t>* out) override {
    tokens(doc)->append(offset, n, out);
  }
  void prepare(const std::vector<int64_t>& docs, int threads) override {
    std::vector<int64_t> missing;
    for (int64_t d : docs)
      if (!cache_.contains(d)) missing.push_back(d);
    run_on_workers(missing.size(), threads, [&](size_t i) { tokens(missing[i]); });
  }
  double seconds_per_token() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return tokens_made_ ? seconds_ / double(tokens_made_) : 0.0;
  }

 private:
  using Tokens = BoundedCache<CachedTokens>::Value;
  Tokens tokens(int64_t doc) {
    ML_CHECK(doc >= 0 && doc < docs(), "document index out of range");
    if (Tokens hit = cache_.find(doc)) return hit;
    const auto start = Clock::now();
    std::string_view text(arena_.data() + offsets_[size_t(doc)],
                          size_t(offsets_[size_t(doc) + 1] - offsets_[size_t(doc)]));
    auto ids = std::make_shared<const CachedTokens>(encode_document(*tokenizer_, text), narrow_);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      seconds_ += seconds_since(start);
      tokens_made_ += ids->size();
    }
    return cache_.insert(doc, ids, ids->size());
  }

  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  const bool narrow_;  // ids fit in 16 bits
  BoundedCache<CachedTokens> cache_;
  std::string arena_;
  std::vector<int64_t> offsets_;
  mutable std::mutex mutex_;  // the cost counters
  int64_t tokens_made_ = 0;
  double seconds_ = 0;
};

}  // namespace

std::vector<int32_t> encode_document(const tokenizer::Tokenizer& tokenizer, std::string_view text) {
  std::vector<int32_t> ids = tokenizer.encode(text);
  if (tokenizer.eot_id() >= 0) ids.push_back(tokenizer.eot_id());
  return ids;
}

std::unique_ptr<DocSource> open_doc_source(const config::Config& config, size_t index) {
  const config::SourceConfig& source = config.data.sources.at(index);
  try {
    switch (source.format) {
      case config::SourceFormat::indexed:
        return std::make_unique<IndexedDocSource>(source.name, source.path,
                                                  config.model.vocab_size);
      case config::SourceFormat::webdataset:
        return open_image_source(source, config.data);
      default:
        return std::make_unique<RawDocSource>(source, config.data.cache_tokens);
    }
  } catch (const TokenError&) {
    throw;
  } catch (const Error& e) {
    throw Error("source '" + source.name + "': " + e.what());
  }
}

namespace {

void check_tokenizer(const config::SourceConfig& s, int64_t vocab) {
  const auto tokenizer = tokenizer::make_tokenizer(s.tokenizer);  // vocabulary files present
  if (tokenizer->vocab_size() > vocab)
    throw Error(
        strf("source '%s': tokenizer '%s' has %d ids, more than model.vocab_size %lld "
             "(which must cover the tokenizer's ids)",
             s.name.c_str(), s.tokenizer.c_str(), tokenizer->vocab_size(), (long long)vocab));
}

// The shards read once from their headers: no usable sample is an error,
// anything skipped a warning naming the first few (the loaders skip the same).
void check_image_source(const config::SourceConfig& s, const config::Config& config) {
  check_tokenizer(s, config.model.vocab_size);
  data::WebDatasetReport r;
  try {
    r = scan_image_source(s, config.data.image);
  } catch (const Error& e) {
    throw Error("source '" + s.name + "': " + e.what());
  }
  std::string first;
  for (const std::string& p : r.problems) first += "\n  " + p;
  if (r.samples == 0)
    throw Error("source '" + s.name + "': '" + s.path +
                "' holds no image-text sample: " + r.summary() + first);
  if (r.skipped_samples() > 0 || !r.problems.empty())
    LOG_WARN("source '%s' (%s): %s (first %zu below)%s", s.name.c_str(), s.path.c_str(),
             r.summary().c_str(), r.problems.size(), first.c_str());
}

// One source opens and holds what its format promises.
void check_source(const config::Config& config, size_t i) {
  const int64_t vocab = config.model.vocab_size;
  const config::SourceConfig& s = config.data.sources[i];
  if (s.format == config::SourceFormat::indexed) {
    open_doc_source(config, i);  // checks the first documents' ids
    return;
  }
  if (s.format == config::SourceFormat::webdataset) {
    check_image_source(s, config);
    return;
  }
  std::error_code ec;
  if (!std::filesystem::exists(s.path, ec))
    throw Error("source '" + s.name + "': cannot read input " + s.path +
                ": No such file or directory");
  check_tokenizer(s, vocab);
  // Read the text once here: the loaders drop bad lines and repair bad
  // UTF-8 as `meshloom prepare` does, and this is the one place to say so.
  data::ReaderOptions opt;
  opt.format = s.format;
  data::DocumentReader reader({s.path}, opt);
  data::Document doc;
  while (reader.next(&doc)) {
  }
  const data::InputReport& r = reader.report();
  if (r.documents == 0)
    throw Error("source '" + s.name + "': '" + s.path +
                "' holds no document: " + why_no_document(r));
  if (r.unreadable > 0) {
    std::string first;
    for (const std::string& p : r.problems) first += "\n  " + p;
    LOG_WARN("source '%s': %llu of %llu items in %s skipped as unreadable (first %zu below)%s",
             s.name.c_str(), (unsigned long long)r.unreadable,
             (unsigned long long)(r.unreadable + r.documents + r.empty), s.path.c_str(),
             r.problems.size(), first.c_str());
  }
  if (r.invalid_utf8_documents > 0)
    LOG_WARN(
        "source '%s': invalid UTF-8 in %llu of %llu documents of %s (%llu sequences "
        "replaced by U+FFFD)",
        s.name.c_str(), (unsigned long long)r.invalid_utf8_documents,
        (unsigned long long)r.documents, s.path.c_str(),
        (unsigned long long)r.invalid_utf8_sequences);
}

// A source whose folder is missing was most likely resolved against another
// folder than its writer meant: say which rule applied.
std::string with_path_rule(const std::string& message, const config::SourceConfig& s, size_t i) {
  std::error_code ec;
  const std::filesystem::path folder = std::filesystem::path(s.path).parent_path();
  if (std::filesystem::is_directory(folder, ec)) return message;
  return strf(
      "%s (data.sources[%zu].path: there is no folder %s; a relative path written in "
      "the config resolves against the config file's folder, one given with --set "
      "against the working directory)",
      message.c_str(), i, folder.string().c_str());
}

}  // namespace

void check_sources(const config::Config& config) {
  for (size_t i = 0; i < config.data.sources.size(); ++i) {
    try {
      check_source(config, i);
    } catch (const Error& e) {
      throw Error(with_path_rule(e.what(), config.data.sources[i], i));
    }
  }
}

}  // namespace meshloom::sources
