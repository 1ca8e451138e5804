// Replays fuzz inputs through a harness's LLVMFuzzerTestOneInput without
// libFuzzer (any compiler): `fuzz_replay_TARGET FILE_OR_DIR...` runs every
// file (folders: every file in them, sorted) once and prints how many ran.
// A finding aborts, as under libFuzzer; so does an unexpected exception.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz/harness.hpp"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    std::error_code ec;
    if (fs::is_directory(argv[i], ec)) {
      for (const auto& e : fs::recursive_directory_iterator(argv[i], ec))
        if (e.is_regular_file() && e.path().filename().string()[0] != '.')
          files.push_back(e.path().string());
    } else if (fs::exists(argv[i], ec)) {
      files.push_back(argv[i]);
    } else {
      std::fprintf(stderr, "fuzz replay: %s does not exist\n", argv[i]);
      return 2;
    }
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) {
      std::fprintf(stderr, "fuzz replay: cannot read %s\n", f.c_str());
      return 2;
    }
    std::fprintf(stderr, "fuzz replay: %s (%zu bytes)\n", f.c_str(), bytes.size());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("fuzz replay: %zu inputs, no finding\n", files.size());
  return files.empty() ? 1 : 0;
}
