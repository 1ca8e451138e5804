// Host <-> GPU element types for the GPU tests: values travel as the raw bits
// of the device type (host code need not use the bf16 operators), with the
// tolerances the tests state against references in double (max |got − ref| /
// max |ref|: ≤ 1e-5 for fp32, ≤ 1e-2 for bf16).
#pragma once

#include <cuda_bf16.h>

#include <bit>
#include <cstdint>

namespace meshloom::cuda::test {

using bf16 = __nv_bfloat16;

template <class T>
struct Elem;
template <>
struct Elem<float> {
  using Bits = float;
  static Bits encode(double x) { return static_cast<float>(x); }
  static double decode(Bits x) { return x; }
  static constexpr double kTolerance = 1e-5;
  static constexpr const char* kName = "fp32";
};
template <>
struct Elem<bf16> {
  using Bits = uint16_t;
  // Round to nearest even (inputs here are finite).
  static Bits encode(double x) {
    const uint32_t u = std::bit_cast<uint32_t>(static_cast<float>(x));
    return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
  static double decode(Bits x) { return std::bit_cast<float>(uint32_t(x) << 16); }
  static constexpr double kTolerance = 1e-2;
  static constexpr const char* kName = "bf16";
};

}  // namespace meshloom::cuda::test
