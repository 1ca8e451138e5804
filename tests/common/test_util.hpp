// Helpers shared by tests: temporary folders and files, the shared reference
// data folder, and a guard that makes fatal errors throw.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include "base/check.hpp"

namespace meshloom::test {

// A fresh folder under the system temp dir, removed when the object dies.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "meshloom-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data()) ? pattern : std::string();
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// Fatal errors throw meshloom::Error while this lives.
struct ThrowOnFatal {
  ThrowOnFatal() : old(set_fatal_handler(throwing_fatal_handler)) {}
  ~ThrowOnFatal() { set_fatal_handler(old); }
  FatalHandler old;
};

}  // namespace meshloom::test
