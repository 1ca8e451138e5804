// The JSON Lines reader (lib/data/documents): the input is the file. One that
// starts like a gzip, xz, bzip2 or zstd stream is named .jsonl.gz/.xz/... so
// that the decompressing path is fuzzed too.
#include "fuzz/documents_common.hpp"

using namespace meshloom;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::init();
  const std::string_view in = fuzz::bytes(data, size);
  std::string name = "docs.jsonl";
  if (in.starts_with("\x1f\x8b"))
    name += ".gz";
  else if (in.starts_with("\xfd"
                          "7zXZ"))
    name += ".xz";
  else if (in.starts_with("BZh"))
    name += ".bz2";
  else if (in.starts_with("\x28\xb5\x2f\xfd"))
    name += ".zst";
  fuzz::read_documents(fuzz::write_file(name, in), config::SourceFormat::jsonl);
  return 0;
}
