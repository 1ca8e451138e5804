// Whether an elementwise kernel may use its 16-byte vector path: every row it
// touches must start on a 16-byte boundary (the base pointers, and the row
// width in bytes) so one access moves 16 bytes. Host code; plain C++.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>

namespace meshloom::cuda {

constexpr size_t kVectorBytes = 16;

inline bool rows_vectorizable(int64_t width, size_t elem_bytes,
                              std::initializer_list<const void*> bases) {
  if (width <= 0 || (static_cast<size_t>(width) * elem_bytes) % kVectorBytes != 0) return false;
  for (const void* p : bases)
    if (reinterpret_cast<uintptr_t>(p) % kVectorBytes != 0) return false;
  return true;
}

}  // namespace meshloom::cuda
