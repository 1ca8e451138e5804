// Helpers for the GPU tests of kernels/ops: values rounded to the element
// type (float or bf16) so the double references see exactly the GPU's inputs,
// device copies of them, and the error measure the tolerances are stated in
// (max |got − ref| / max |ref|: ≤ 1e-5 for fp32, ≤ 1e-2 for bf16).
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/common/device_buffer.hpp"

namespace meshloom::kernels::test {

using bf16 = __nv_bfloat16;

// Host <-> element type through raw bits of the same size (host code need not
// use the bf16 operators).
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

// Values rounded to T.
template <class T>
std::vector<double> round_to(std::vector<double> v) {
  for (double& x : v) x = Elem<T>::decode(Elem<T>::encode(x));
  return v;
}

// N(0, scale²) values rounded to T.
template <class T>
std::vector<double> random_values(int64_t n, double scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, scale);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = normal(rng);
  return round_to<T>(std::move(v));
}

// A device array of T holding given values.
template <class T>
class DeviceValues {
 public:
  using Bits = typename Elem<T>::Bits;
  explicit DeviceValues(const std::vector<double>& v) {
    std::vector<Bits> bits(v.size());
    for (size_t i = 0; i < v.size(); ++i) bits[i] = Elem<T>::encode(v[i]);
    buf_.upload(bits);
  }
  T* data() { return reinterpret_cast<T*>(buf_.data()); }
  std::vector<double> download() const {
    const std::vector<Bits> bits = buf_.download();
    std::vector<double> v(bits.size());
    for (size_t i = 0; i < v.size(); ++i) v[i] = Elem<T>::decode(bits[i]);
    return v;
  }

 private:
  DeviceBuffer<Bits> buf_;
};

inline std::vector<double> to_double(const std::vector<float>& v) {
  return std::vector<double>(v.begin(), v.end());
}

// max |got − ref| / max |ref| (the denominator at least 1e-30).
inline double max_rel_error(const std::vector<double>& got, const std::vector<double>& ref) {
  double err = 0, scale = 1e-30;
  for (size_t i = 0; i < ref.size(); ++i) {
    err = std::max(err, std::abs(got[i] - ref[i]));
    if (std::isnan(got[i])) err = INFINITY;
    scale = std::max(scale, std::abs(ref[i]));
  }
  return err / scale;
}

}  // namespace meshloom::kernels::test
