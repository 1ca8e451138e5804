// WebDataset shards written with libarchive from the committed test images
// (tests/data/images), for the tests of image-text sources. Needs
// MESHLOOM_SOURCE_DIR and libarchive.
#pragma once

#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace meshloom::test {

using Members = std::vector<std::pair<std::string, std::string>>;

// The bytes of tests/data/images/NAME.
inline std::string test_image(const std::string& name) {
  std::ifstream in(std::string(MESHLOOM_SOURCE_DIR) + "/tests/data/images/" + name,
                   std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

inline void write_shard(const std::string& path, const Members& members, bool gzip = false) {
  struct archive* a = archive_write_new();
  if (gzip) archive_write_add_filter_gzip(a);
  archive_write_set_format_pax_restricted(a);
  ASSERT_EQ(archive_write_open_filename(a, path.c_str()), ARCHIVE_OK) << archive_error_string(a);
  for (const auto& [name, content] : members) {
    struct archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, name.c_str());
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_size(e, static_cast<la_int64_t>(content.size()));
    ASSERT_EQ(archive_write_header(a, e), ARCHIVE_OK) << archive_error_string(a);
    archive_write_data(a, content.data(), content.size());
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
}

}  // namespace meshloom::test
