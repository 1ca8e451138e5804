#include "data/length_table.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "base/check.hpp"
#include "base/strings.hpp"
#include "data/documents.hpp"
#include "data/indexed_dataset.hpp"

namespace meshloom::data {

namespace {

// The field a TSV header names as the length column.
size_t header_column(const std::vector<std::string>& header, const std::string& path) {
  int column = -1;
  for (size_t i = 0; i < header.size(); ++i)
    if (header[i] == "gpt2_tokens" || header[i] == "tokens" || header[i] == "length")
      column = int(i);
  if (column < 0)
    throw Error(
        strf("%s:1: a TSV header needs a gpt2_tokens (or tokens, length) column", path.c_str()));
  return size_t(column);
}

int64_t parse_length(const std::string& cell, const std::string& path, int line_no) {
  char* end = nullptr;
  const long long v = std::strtoll(cell.c_str(), &end, 10);
  if (cell.empty() || *end != '\0' || v < 0)
    throw Error(
        strf("%s:%d: expected a token count, got '%s'", path.c_str(), line_no, cell.c_str()));
  return v;
}

std::vector<int64_t> read_text_table(const std::string& path) {
  std::istringstream in;
  try {
    in.str(read_whole_file(path));  // .xz and the like decompressed
  } catch (const Error& e) {
    throw Error(std::string("cannot read lengths file: ") + e.what());
  }
  std::vector<int64_t> out;
  std::string line;
  size_t column = 0;  // a plain file's only field, unless a TSV header names another
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    const std::vector<std::string> f = split(line, '\t');
    if (line_no == 1 && f.size() > 1) {
      column = header_column(f, path);
      continue;
    }
    out.push_back(parse_length(column < f.size() ? f[column] : std::string(), path, line_no));
  }
  return out;
}

}  // namespace

std::vector<int64_t> read_length_table(const std::string& path) {
  std::vector<int64_t> out = path.ends_with(".idx")
                                 ? read_document_lengths(path.substr(0, path.size() - 4))
                                 : read_text_table(path);
  std::erase(out, 0);  // empty documents carry no tokens
  if (out.empty()) throw Error("lengths file '" + path + "' holds no lengths");
  return out;
}

}  // namespace meshloom::data
