// The JSONL and tar harnesses read one input file through DocumentReader.
#pragma once

#include <string>

#include "base/utf8.hpp"
#include "data/documents.hpp"
#include "fuzz/harness.hpp"

namespace meshloom::fuzz {

// Reads every document of `path` in `format`. Checks: documents are valid
// UTF-8 (invalid bytes become U+FFFD), the report adds up, and an Error
// names the file.
inline void read_documents(const std::string& path, config::SourceFormat format) {
  data::ReaderOptions options;
  options.format = format;
  options.max_document_bytes = uint64_t{1} << 20;
  try {
    data::DocumentReader reader({path}, options);
    data::Document doc;
    uint64_t docs = 0, bytes = 0;
    while (reader.next(&doc)) {
      ++docs;
      bytes += doc.text.size();
      if (doc.text.empty()) finding("an empty document was delivered: " + doc.name);
      if (valid_utf8_prefix(doc.text) != doc.text.size())
        finding("a document with invalid UTF-8 was delivered: " + doc.name);
      if (doc.name.find(path) == std::string::npos)
        finding("a document whose name does not name its file: " + doc.name);
    }
    const data::InputReport& r = reader.report();
    if (r.documents != docs || r.bytes != bytes)
      finding("the report does not count what was delivered");
    if (r.problems.size() > r.unreadable) finding("more problems named than counted");
  } catch (const Error& e) {
    expect_names(e, {path});
  }
}

}  // namespace meshloom::fuzz
