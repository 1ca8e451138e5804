// The indexed-dataset reader (lib/data/indexed_dataset): the input is a
// 4-byte little-endian length N, then N bytes of PREFIX.idx, then the bytes
// of PREFIX.bin (shorter inputs: all .idx, empty .bin).
//
// Checks: opening validates everything (the header promises later accesses
// need no checks), so after it every sequence, token and document is read;
// bad files are one Error naming the file.
#include <cstring>
#include <string>
#include <vector>

#include "data/indexed_dataset.hpp"
#include "fuzz/harness.hpp"

using namespace meshloom;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::init();
  std::string_view in = fuzz::bytes(data, size), idx = in, bin;
  if (in.size() >= 4) {
    uint32_t n = 0;
    std::memcpy(&n, in.data(), 4);
    in.remove_prefix(4);
    idx = in.substr(0, n);
    bin = n < in.size() ? in.substr(n) : std::string_view();
  }
  const std::string prefix = fuzz::scratch_dir() + "/ds";
  fuzz::write_file("ds.idx", idx);
  fuzz::write_file("ds.bin", bin);
  try {
    data::IndexedDataset ds(prefix);
    uint64_t tokens = 0;
    std::vector<int32_t> out;
    for (size_t i = 0; i < ds.size(); ++i) {
      const data::TokenView v = ds.tokens(i);
      if (v.size != size_t(ds.length(i))) fuzz::finding("a view's size is not its length");
      tokens += v.size;
      out.clear();
      try {
        v.append_to(&out);  // int64 tokens outside int32 throw
      } catch (const Error& e) {
        fuzz::expect_names(e, {"ds.bin", "ds.idx", "token"});
      }
      (void)ds.pointer(i);
    }
    if (tokens != ds.num_tokens()) fuzz::finding("the sequences' tokens do not add up");
    for (size_t d = 0; d < ds.num_documents(); ++d) {
      const auto [first, last] = ds.document_sequences(d);
      if (first > last || last > ds.size()) fuzz::finding("a document outside the sequences");
    }
  } catch (const Error& e) {
    fuzz::expect_names(e, {"ds.idx", "ds.bin"});
  }
  try {
    const std::vector<int64_t> lengths = data::read_document_lengths(prefix);
    for (int64_t l : lengths)
      if (l < 0) fuzz::finding("a negative document length");
  } catch (const Error& e) {
    fuzz::expect_names(e, {"ds.idx"});
  }
  return 0;
}
