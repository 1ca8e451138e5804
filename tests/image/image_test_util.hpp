// Shared by the image tests: the committed test images (tests/data/images).
#pragma once

#include <fstream>
#include <sstream>
#include <string>

namespace meshloom::image::testing {

inline std::string test_image_path(const std::string& name) {
  return std::string(MESHLOOM_SOURCE_DIR) + "/tests/data/images/" + name;
}

inline std::string read_test_image(const std::string& name) {
  std::ifstream in(test_image_path(name), std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

}  // namespace meshloom::image::testing
