// Helpers for the GPU tests of kernels/device/ops: values rounded to the element
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

#include "config/config.hpp"
#include "kernels/host/device_buffer.hpp"
#include "tests/kernels/elem_host.hpp"

namespace meshloom::cuda::test {

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

// N(0, scale²) floats (optimizer state and gradients).
inline std::vector<float> random_floats(int64_t n, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = normal(rng);
  return v;
}

// The optimizer settings of the AdamW tests: a short warmup, then cosine;
// decay and clipping both active.
inline config::OptimConfig adamw_test_config() {
  config::OptimConfig o;
  o.lr = 3e-3;
  o.min_lr = 3e-4;
  o.warmup_steps = 2;
  o.weight_decay = 0.1;
  o.grad_clip = 1.0;
  return o;
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

}  // namespace meshloom::cuda::test
