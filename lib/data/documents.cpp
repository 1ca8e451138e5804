// Document readers: folders, text files, JSON Lines and tar archives.
#include "data/documents.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/check.hpp"
#include "base/strings.hpp"
#include "base/utf8.hpp"

namespace meshloom::data {

namespace fs = std::filesystem;

namespace {

constexpr size_t kChunk = 1 << 20;

// Thrown inside a unit when the rest of that file or archive cannot be read:
// the reader skips the unit (noting why) unless the user named it.
struct UnitFailure : Error {
  using Error::Error;
};

bool ends_with(const std::string& s, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

bool is_compressed_name(const std::string& path) {
  for (const char* ext : {".gz", ".xz", ".bz2", ".zst", ".lz4", ".lzma", ".tgz", ".txz"})
    if (ends_with(path, ext)) return true;
  return false;
}

bool is_archive_name(const std::string& path) {
  for (const char* ext : {".tar", ".tar.gz", ".tgz", ".tar.xz", ".txz", ".tar.bz2", ".tar.zst",
                          ".tar.lz4", ".tar.lzma"})
    if (ends_with(path, ext)) return true;
  return false;
}

std::string base_name(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool glob_matches(const std::string& glob, const std::string& relative) {
  if (glob.empty()) return true;
  const std::string subject = glob.find('/') == std::string::npos ? base_name(relative) : relative;
  return ::fnmatch(glob.c_str(), subject.c_str(), 0) == 0;
}

// ------------------------------------------------------------- byte streams

// Sequential bytes from a file, decompressed if its name says so.
class ByteStream {
 public:
  virtual ~ByteStream() = default;
  // Up to n bytes; 0 at the end. Throws UnitFailure on a read error.
  virtual size_t read(char* buf, size_t n) = 0;
  // Bytes of the file consumed so far (compressed bytes where compressed).
  virtual uint64_t consumed() const = 0;
};

class FileStream final : public ByteStream {
 public:
  explicit FileStream(int fd) : fd_(fd) {}
  ~FileStream() override { ::close(fd_); }
  size_t read(char* buf, size_t n) override {
    for (;;) {
      ssize_t r = ::read(fd_, buf, n);
      if (r >= 0) {
        consumed_ += static_cast<uint64_t>(r);
        return static_cast<size_t>(r);
      }
      if (errno != EINTR) throw UnitFailure(std::string("read error: ") + std::strerror(errno));
    }
  }
  uint64_t consumed() const override { return consumed_; }

 private:
  int fd_;
  uint64_t consumed_ = 0;
};

std::string archive_error(struct archive* a) {
  const char* e = archive_error_string(a);
  return e != nullptr ? e : "unknown libarchive error";
}

// A compressed single file through libarchive's "raw" format.
class DecompressStream final : public ByteStream {
 public:
  explicit DecompressStream(const std::string& path) : a_(archive_read_new()) {
    archive_read_support_filter_all(a_);
    archive_read_support_format_raw(a_);
    struct archive_entry* entry = nullptr;
    if (archive_read_open_filename(a_, path.c_str(), 1 << 16) != ARCHIVE_OK ||
        archive_read_next_header(a_, &entry) != ARCHIVE_OK) {
      // A constructor that throws runs no destructor: free the archive here.
      const std::string why = "cannot decompress: " + archive_error(a_);
      archive_read_free(a_);
      throw UnitFailure(why);
    }
  }
  ~DecompressStream() override { archive_read_free(a_); }
  size_t read(char* buf, size_t n) override {
    la_ssize_t r = archive_read_data(a_, buf, n);
    if (r < 0) throw UnitFailure("decompression error: " + archive_error(a_));
    return static_cast<size_t>(r);
  }
  uint64_t consumed() const override { return static_cast<uint64_t>(archive_filter_bytes(a_, -1)); }

 private:
  struct archive* a_;
};

// Opens path as a byte stream. Throws UnitFailure if it cannot be opened.
std::unique_ptr<ByteStream> open_stream(const std::string& path) {
  if (is_compressed_name(path)) return std::make_unique<DecompressStream>(path);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw UnitFailure(std::string("cannot open: ") + std::strerror(errno));
  return std::make_unique<FileStream>(fd);
}

}  // namespace

std::string read_whole_file(const std::string& path) {
  try {
    std::unique_ptr<ByteStream> stream = open_stream(path);
    std::string text;
    char buf[1 << 16];
    while (size_t n = stream->read(buf, sizeof(buf))) text.append(buf, n);
    return text;
  } catch (const UnitFailure& f) {
    throw Error(path + ": " + f.what());
  }
}

// ------------------------------------------------------------------ units

// One file or archive being read: yields its documents in order.
class DocumentReader::Unit {
 public:
  virtual ~Unit() = default;
  // The next document; false at the end. Item-level problems go to *report;
  // a failure that ends the unit throws UnitFailure.
  virtual bool next(Document* doc, InputReport* report) = 0;
  virtual uint64_t consumed() const = 0;
};

namespace {

using Unit = DocumentReader::Unit;

// A whole file is one document.
class WholeFileUnit final : public Unit {
 public:
  WholeFileUnit(const std::string& path, uint64_t size, uint64_t max_bytes)
      : path_(path),
        size_(size),
        max_bytes_(max_bytes),
        too_large_(size > max_bytes && !is_compressed_name(path)),
        stream_(too_large_ ? nullptr : open_stream(path)) {}
  bool next(Document* doc, InputReport* report) override {
    if (done_) return false;
    done_ = true;
    if (too_large_) {
      report->add_problem(path_, strf("larger than the %s document limit, skipped",
                                      human_bytes(static_cast<double>(max_bytes_)).c_str()));
      return false;
    }
    doc->name = path_;
    doc->member.clear();
    doc->text.clear();
    if (!is_compressed_name(path_)) doc->text.reserve(static_cast<size_t>(size_));
    char buf[1 << 16];
    for (;;) {
      const size_t n = stream_->read(buf, sizeof(buf));
      if (n == 0) break;
      if (doc->text.size() + n > max_bytes_) {
        report->add_problem(path_, strf("larger than the %s document limit, skipped",
                                        human_bytes(static_cast<double>(max_bytes_)).c_str()));
        return false;
      }
      doc->text.append(buf, n);
    }
    return true;
  }
  uint64_t consumed() const override { return stream_ ? stream_->consumed() : 0; }

 private:
  std::string path_;
  uint64_t size_;
  uint64_t max_bytes_;
  bool too_large_;
  std::unique_ptr<ByteStream> stream_;
  bool done_ = false;
};

// JSON Lines: one document per line's text field.
class JsonlUnit final : public Unit {
 public:
  JsonlUnit(const std::string& path, const ReaderOptions& options)
      : path_(path), options_(options), stream_(open_stream(path)) {}

  bool next(Document* doc, InputReport* report) override {
    std::string line;
    while (next_line(&line, report)) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank line
      const std::string where = strf("%s:%llu", path_.c_str(), line_no_);
      // nlohmann rejects invalid UTF-8 inside strings, so repair before parsing;
      // counted only for a line that becomes a document (skipped ones are
      // reported as skipped).
      const size_t bad = sanitize_utf8(&line);
      nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded()) {
        report->add_problem(where, "not valid JSON, skipped");
        continue;
      }
      if (!j.is_object()) {
        report->add_problem(where, "not a JSON object, skipped");
        continue;
      }
      auto it = j.find(options_.json_key);
      if (it == j.end() || !it->is_string()) {
        report->add_problem(where, "no string field \"" + options_.json_key + "\", skipped");
        continue;
      }
      if (bad > 0) {
        report->invalid_utf8_documents++;
        report->invalid_utf8_sequences += bad;
      }
      doc->name = where;
      doc->member.clear();
      doc->text = std::move(it->get_ref<std::string&>());
      return true;
    }
    return false;
  }
  uint64_t consumed() const override { return stream_->consumed(); }

 private:
  // The next line without its '\n'; lines over the size limit are reported and
  // skipped. False at the end of the file.
  bool next_line(std::string* line, InputReport* report) {
    line->clear();
    bool too_long = false;
    for (;;) {
      if (pos_ == buf_.size()) {
        if (eof_) break;
        buf_.resize(kChunk);
        const size_t n = stream_->read(buf_.data(), kChunk);
        buf_.resize(n);
        pos_ = 0;
        if (n == 0) {
          eof_ = true;
          break;
        }
      }
      const char* start = buf_.data() + pos_;
      const void* nl = std::memchr(start, '\n', buf_.size() - pos_);
      const size_t take = nl ? static_cast<const char*>(nl) - start : buf_.size() - pos_;
      if (!too_long) {
        if (line->size() + take > options_.max_document_bytes) {
          too_long = true;
          line->clear();
        } else {
          line->append(start, take);
        }
      }
      pos_ += take;
      if (nl) {
        ++pos_;
        ++line_no_;
        if (too_long) {
          report->add_problem(strf("%s:%llu", path_.c_str(), line_no_),
                              "line longer than the document limit, skipped");
          too_long = false;
          continue;
        }
        return true;
      }
    }
    if (too_long) {
      ++line_no_;
      report->add_problem(strf("%s:%llu", path_.c_str(), line_no_),
                          "line longer than the document limit, skipped");
      return false;
    }
    if (line->empty()) return false;
    ++line_no_;  // a last line without '\n'
    return true;
  }

  std::string path_;
  const ReaderOptions& options_;
  std::unique_ptr<ByteStream> stream_;
  std::vector<char> buf_;
  size_t pos_ = 0;
  bool eof_ = false;
  unsigned long long line_no_ = 0;
};

// A tar archive: each regular-file member (matching the glob) is a document.
class TarUnit final : public Unit {
 public:
  TarUnit(const std::string& path, const ReaderOptions& options, bool named)
      : path_(path), options_(options), named_(named), a_(archive_read_new()) {
    archive_read_support_filter_all(a_);
    archive_read_support_format_tar(a_);
    archive_read_support_format_empty(a_);
    if (archive_read_open_filename(a_, path.c_str(), 1 << 16) != ARCHIVE_OK) {
      // A constructor that throws runs no destructor: free the archive here.
      try {
        fail_open();
      } catch (...) {
        archive_read_free(a_);
        throw;
      }
    }
  }
  ~TarUnit() override { archive_read_free(a_); }

  bool next(Document* doc, InputReport* report) override {
    for (;;) {
      struct archive_entry* entry = nullptr;
      const int r = archive_read_next_header(a_, &entry);
      if (r == ARCHIVE_EOF) return false;
      if (r < ARCHIVE_WARN) {
        if (first_) fail_open();
        throw UnitFailure("archive error after " + std::to_string(members_) +
                          " members: " + archive_error(a_));
      }
      first_ = false;
      ++members_;
      // Only regular files; a hard link repeats another member's content.
      if (archive_entry_filetype(entry) != AE_IFREG || archive_entry_hardlink(entry) != nullptr)
        continue;
      const char* raw_name = archive_entry_pathname(entry);
      const std::string member = raw_name != nullptr ? raw_name : "";
      if (!glob_matches(options_.glob, member)) continue;
      const std::string name = path_ + ":" + member;
      if (archive_entry_size_is_set(entry) &&
          static_cast<uint64_t>(archive_entry_size(entry)) > options_.max_document_bytes) {
        report->add_problem(
            name, strf("larger than the %s document limit, skipped",
                       human_bytes(static_cast<double>(options_.max_document_bytes)).c_str()));
        if (archive_read_data_skip(a_) != ARCHIVE_OK)
          throw UnitFailure("archive error skipping " + member + ": " + archive_error(a_));
        continue;
      }
      doc->name = name;
      doc->member = member;
      doc->text.clear();
      if (archive_entry_size_is_set(entry))
        doc->text.reserve(static_cast<size_t>(archive_entry_size(entry)));
      char buf[1 << 16];
      for (;;) {
        const la_ssize_t n = archive_read_data(a_, buf, sizeof(buf));
        if (n == 0) break;
        if (n < 0)
          throw UnitFailure("archive error reading member " + member + ": " + archive_error(a_));
        if (doc->text.size() + static_cast<size_t>(n) > options_.max_document_bytes)
          throw UnitFailure("member " + member + " exceeds the document limit");
        doc->text.append(buf, static_cast<size_t>(n));
      }
      return true;
    }
  }
  uint64_t consumed() const override { return static_cast<uint64_t>(archive_filter_bytes(a_, -1)); }

 private:
  // A failure before the first member: the file is no (readable) tar archive.
  // Fatal for an archive the caller named; a problem for one found in a folder.
  [[noreturn]] void fail_open() {
    const std::string why = "not a readable tar archive: " + archive_error(a_);
    if (named_) throw Error(path_ + ": " + why);
    throw UnitFailure(why);
  }

  std::string path_;
  const ReaderOptions& options_;
  bool named_;
  struct archive* a_;
  bool first_ = true;
  uint64_t members_ = 0;
};

// Lists a folder recursively: regular files (symlinks to files included,
// symlinked folders not followed) whose relative path passes `keep`. A folder
// that cannot be listed is reported, not fatal.
template <typename Keep>
void list_folder(const fs::path& root, const fs::path& dir, const Keep& keep,
                 std::vector<DocumentReader::FileEntry>* out, InputReport* report) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) {
    report->add_problem(dir.string(), "cannot list folder: " + ec.message());
    return;
  }
  std::vector<fs::path> subdirs;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) break;
    const fs::directory_entry& e = *it;
    std::error_code ec2;
    if (e.is_directory(ec2) && !e.is_symlink(ec2)) {
      subdirs.push_back(e.path());
    } else if (e.is_regular_file(ec2)) {
      const std::string rel = e.path().lexically_relative(root).string();
      if (keep(rel)) {
        const uint64_t size = e.file_size(ec2);
        out->push_back({e.path().string(), ec2 ? 0 : size, false});
      }
    } else if (e.is_symlink(ec2) && !e.exists(ec2)) {
      // A link to nothing would otherwise vanish without a word.
      const std::string rel = e.path().lexically_relative(root).string();
      if (keep(rel)) report->add_problem(e.path().string(), "a symbolic link to nothing, skipped");
    }
  }
  if (ec) report->add_problem(dir.string(), "error while listing folder: " + ec.message());
  for (const fs::path& sub : subdirs) list_folder(root, sub, keep, out, report);
}

}  // namespace

// ------------------------------------------------------------ the reader

config::SourceFormat parse_input_format(const std::string& name) {
  for (config::SourceFormat f :
       {config::SourceFormat::text, config::SourceFormat::jsonl, config::SourceFormat::tar})
    if (name == input_format_name(f)) return f;
  throw Error("unknown input format '" + name + "' (text, jsonl, tar)");
}

const char* input_format_name(config::SourceFormat format) {
  return config::kSourceFormatNames.at(size_t(format));
}

void InputReport::add_problem(const std::string& name, const std::string& reason) {
  ++unreadable;
  if (problems.size() < max_named_problems) problems.push_back(name + ": " + reason);
}

DocumentReader::DocumentReader(std::vector<std::string> inputs, ReaderOptions options)
    : options_(std::move(options)) {
  report_.max_named_problems = options_.max_named_problems;
  if (inputs.empty()) throw Error("no input paths given");
  for (const std::string& input : inputs) {
    struct stat st;
    if (::stat(input.c_str(), &st) != 0)
      throw Error("cannot read input " + input + ": " + std::strerror(errno));
    if (S_ISDIR(st.st_mode)) {
      std::vector<FileEntry> files;
      const bool tar = options_.format == config::SourceFormat::tar;
      const std::string& glob = options_.glob;
      list_folder(
          fs::path(input), fs::path(input),
          [tar, &glob](const std::string& rel) {
            return tar ? is_archive_name(rel) : glob_matches(glob, rel);
          },
          &files, &report_);
      std::sort(files.begin(), files.end(),
                [](const FileEntry& a, const FileEntry& b) { return a.path < b.path; });
      for (FileEntry& f : files) {
        total_bytes_ += f.size;
        units_.push_back(std::move(f));
      }
    } else if (S_ISREG(st.st_mode)) {
      int fd = ::open(input.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) throw Error("cannot read input " + input + ": " + std::strerror(errno));
      ::close(fd);
      units_.push_back({input, static_cast<uint64_t>(st.st_size), true});
      total_bytes_ += static_cast<uint64_t>(st.st_size);
    } else {
      throw Error("cannot read input " + input + ": not a regular file or folder");
    }
  }
}

DocumentReader::~DocumentReader() = default;

bool DocumentReader::next(Document* doc) {
  for (;;) {
    if (!current_) {
      if (next_unit_ == units_.size()) {
        consumed_.store(total_bytes_, std::memory_order_relaxed);
        return false;
      }
      const FileEntry& f = units_[next_unit_];
      try {
        switch (options_.format) {
          case config::SourceFormat::text:
            current_ = std::make_unique<WholeFileUnit>(f.path, f.size, options_.max_document_bytes);
            break;
          case config::SourceFormat::jsonl:
            current_ = std::make_unique<JsonlUnit>(f.path, options_);
            break;
          case config::SourceFormat::tar:
            current_ = std::make_unique<TarUnit>(f.path, options_, f.named);
            break;
          case config::SourceFormat::indexed:  // tokens, not documents: their own readers
          case config::SourceFormat::webdataset:
            ML_FAIL(
                strf("the document reader does not read %s", input_format_name(options_.format)));
        }
      } catch (const UnitFailure& e) {
        if (f.named) throw Error("cannot read input " + f.path + ": " + e.what());
        report_.add_problem(f.path, e.what());
      }
      if (!current_) {  // the unit could not be opened
        done_bytes_ += f.size;
        consumed_.store(done_bytes_, std::memory_order_relaxed);
        ++next_unit_;
        continue;
      }
    }
    const FileEntry& f = units_[next_unit_];
    bool got = false;
    try {
      got = current_->next(doc, &report_);
    } catch (const UnitFailure& e) {
      report_.add_problem(f.path, e.what());
    }
    if (got) {
      consumed_.store(done_bytes_ + std::min(current_->consumed(), f.size),
                      std::memory_order_relaxed);
      if (deliver(doc)) return true;
      continue;
    }
    current_.reset();
    done_bytes_ += f.size;
    consumed_.store(done_bytes_, std::memory_order_relaxed);
    ++next_unit_;
  }
}

// Counts the document; false if it is skipped (empty).
bool DocumentReader::deliver(Document* doc) {
  if (doc->text.empty()) {
    ++report_.empty;
    return false;
  }
  if (options_.fix_utf8) {
    if (size_t bad = sanitize_utf8(&doc->text); bad > 0) {
      ++report_.invalid_utf8_documents;
      report_.invalid_utf8_sequences += bad;
    }
  }
  ++report_.documents;
  report_.bytes += doc->text.size();
  return true;
}

}  // namespace meshloom::data
