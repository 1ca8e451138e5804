// The tar reader (lib/data/documents, libarchive): the input is the archive,
// plain or compressed (libarchive detects the filter from the bytes).
#include "fuzz/documents_common.hpp"

using namespace meshloom;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::init();
  fuzz::read_documents(fuzz::write_file("docs.tar", fuzz::bytes(data, size)),
                       config::SourceFormat::tar);
  return 0;
}
