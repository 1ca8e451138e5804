// Read-only memory maps of whole files, and the SIGBUS guard for mapped
// .bin files: a file truncated while mapped makes reads past its new end
// raise SIGBUS, which names nothing; a watched file's fault becomes one error
// line naming it and exit 2 (bad input).
#pragma once

#include <cstddef>
#include <string>

namespace meshloom::data {

// A read-only mapping of a whole file; size 0 maps nothing.
struct Mapping {
  const std::byte* data = nullptr;
  size_t size = 0;
};

// Maps all of `path`; throws meshloom::Error naming it when it cannot.
Mapping map_file(const std::string& path);
void unmap_file(const std::byte* data, size_t size);

// Unmaps on scope exit unless released.
struct MappingGuard {
  Mapping m;
  ~MappingGuard() { unmap_file(m.data, m.size); }
  Mapping release() {
    Mapping out = m;
    m = Mapping{};
    return out;
  }
};

// Names `path` if a read of [data, data + size) faults (at most 64 files at
// once); unwatch_bin before unmapping.
void watch_bin(const std::string& path, const std::byte* data, size_t size);
void unwatch_bin(const std::byte* data);

}  // namespace meshloom::data
