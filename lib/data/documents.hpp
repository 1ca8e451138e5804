// Document readers: turn input paths into a stream of text documents.
//
// Formats (one per reader):
//   text   a file is one document; a folder is read recursively, each regular
//          file one document, in sorted path order
//   jsonl  JSON Lines; each line's "text" string is one document
//   tar    tar archives, plain or compressed (.gz, .xz, .bz2, .zst: any filter
//          libarchive knows), each regular-file member one document, in archive
//          order; a folder of archives is read in sorted order
// Text and JSON Lines files may also be compressed; a name ending in .gz, .xz,
// .bz2, .zst, .lz4 or .lzma is decompressed on the fly.
//
// The one rule: bad data never stops a run and is never silently dropped.
//   - invalid UTF-8: each bad sequence becomes U+FFFD (see utf8.hpp), counted
//   - empty documents: skipped, counted
//   - unreadable files or archive members, bad JSON lines, lines without a
//     "text" string, documents over the size limit: skipped, counted, and the
//     first few are named in InputReport::problems
// Only a path named by the caller that does not exist or cannot be opened
// throws meshloom::Error (naming it): that is a bad command line, not bad data.
//
// The order of documents depends only on the inputs, so that prepared datasets
// are reproducible.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/source_format.hpp"

namespace meshloom::data {

// The reader's formats: "text" | "jsonl" | "tar"; throws Error on anything else.
config::SourceFormat parse_input_format(const std::string& name);
const char* input_format_name(config::SourceFormat format);

struct ReaderOptions {
  config::SourceFormat format = config::SourceFormat::text;  // text, jsonl or tar
  // fnmatch(3) pattern selecting documents: files inside folders (text,
  // jsonl) or members inside archives (tar), matched against the base name
  // ("*.rst.txt"), or against the relative path if it contains '/'. Empty:
  // everything. Files named directly are always read; with --format tar a
  // folder contributes the files whose names look like archives (*.tar,
  // *.tar.gz, *.tgz, *.tar.xz, *.txz, *.tar.bz2, *.tar.zst, ...).
  std::string glob;
  // The JSON Lines field holding the text.
  std::string json_key = "text";
  // Replace invalid UTF-8 here. Set false when the caller sanitizes later (the
  // prepare pipeline does it on its worker threads) and merges the counts.
  bool fix_utf8 = true;
  // Larger documents (JSON lines, files, members) are skipped as problems.
  uint64_t max_document_bytes = uint64_t{1} << 30;
  // How many problems to name in InputReport::problems.
  size_t max_named_problems = 5;
};

struct Document {
  std::string name;  // "path", "archive.tar.gz:member/path" or "file.jsonl:LINE"
  std::string text;
  std::string member;  // tar: the member's path inside the archive (name's tail); else empty
};

struct InputReport {
  uint64_t documents = 0;  // documents delivered
  uint64_t bytes = 0;      // text bytes delivered (after UTF-8 repair)
  uint64_t empty = 0;      // empty documents skipped
  uint64_t invalid_utf8_documents = 0;
  uint64_t invalid_utf8_sequences = 0;  // replaced by U+FFFD
  uint64_t unreadable = 0;              // files, members or lines skipped as problems
  std::vector<std::string> problems;    // the first few, "NAME: reason"
  size_t max_named_problems = 5;

  // Counts one unreadable item and names it if fewer than the limit are named.
  void add_problem(const std::string& name, const std::string& reason);
};

class DocumentReader {
 public:
  // Checks that every input exists and can be opened, and lists folders (so
  // total_bytes() is known from the start). Throws Error naming the first bad
  // input.
  DocumentReader(std::vector<std::string> inputs, ReaderOptions options);
  ~DocumentReader();
  DocumentReader(const DocumentReader&) = delete;
  DocumentReader& operator=(const DocumentReader&) = delete;

  // The next document, or false at the end. May throw Error only for an input
  // named by the caller that turns out not to be readable in its format (a
  // file given as --format tar that is no archive).
  bool next(Document* doc);

  // Input bytes (file sizes on disk, compressed where compressed) in total and
  // consumed so far: for progress and ETA. consumed_bytes() may be called from
  // any thread.
  uint64_t total_bytes() const { return total_bytes_; }
  uint64_t consumed_bytes() const { return consumed_.load(std::memory_order_relaxed); }
  // Number of files (or archives) to read.
  size_t num_files() const { return units_.size(); }

  const InputReport& report() const { return report_; }

  class Unit;  // one file or archive being read (documents.cpp)

  struct FileEntry {
    std::string path;
    uint64_t size = 0;
    bool named = false;  // named by the caller, not found in a folder
  };

 private:
  bool deliver(Document* doc);

  ReaderOptions options_;
  std::vector<FileEntry> units_;
  size_t next_unit_ = 0;
  std::unique_ptr<Unit> current_;
  uint64_t total_bytes_ = 0;
  uint64_t done_bytes_ = 0;  // bytes of finished units
  std::atomic<uint64_t> consumed_{0};
  InputReport report_;
};

// The whole file's bytes, decompressed if its name says so (.gz, .xz, ...).
// Throws meshloom::Error naming the file.
std::string read_whole_file(const std::string& path);

}  // namespace meshloom::data
