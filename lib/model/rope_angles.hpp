// RoPE's angles, shared by the CPU model (per-token tables) and the GPU (one
// per-position table): angle(p, i) = p · θ^(−2i/D) (scaled by
// model.rope_scaling), computed in double.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>
#include <vector>

#include "config/config.hpp"

namespace meshloom::model {

// θ^(−2i/D), the i-th pair's frequency (i < D/2).
inline double rope_frequency(int64_t i, int64_t head_dim, double theta) {
  return std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
}

// The same frequency after model.rope_scaling, as Hugging Face's
// _compute_linear_scaling / _compute_llama3_parameters define it: linear
// divides it by the factor; llama3 divides the frequencies whose wavelength
// exceeds original / low_freq_factor, keeps those below original /
// high_freq_factor, and blends linearly (in original / wavelength) between.
inline double rope_frequency(int64_t i, int64_t head_dim, double theta,
                             const config::RopeScalingConfig& s) {
  const double f = rope_frequency(i, head_dim, theta);
  switch (s.type) {
    case config::RopeScaling::none:
      return f;
    case config::RopeScaling::linear:
      return f / s.factor;
    case config::RopeScaling::llama3:
      break;
  }
  const double original = static_cast<double>(s.original_max_position_embeddings);
  const double wavelength = 2.0 * std::numbers::pi / f;
  if (wavelength < original / s.high_freq_factor) return f;
  if (wavelength > original / s.low_freq_factor) return f / s.factor;
  const double smooth =
      (original / wavelength - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  return (1.0 - smooth) * f / s.factor + smooth * f;
}

// cos and sin of every position's angles, [positions, D/2] each, rounded to
// float from double: the values the CPU model rounds its tables to.
struct RopeTable {
  std::vector<float> cos, sin;
};

inline RopeTable rope_table(int64_t positions, int64_t head_dim, double theta,
                            const config::RopeScalingConfig& scaling = {}) {
  const int64_t half = head_dim / 2;
  RopeTable t;
  t.cos.resize(static_cast<size_t>(positions * half));
  t.sin.resize(t.cos.size());
  for (int64_t i = 0; i < half; ++i) {
    const double freq = rope_frequency(i, head_dim, theta, scaling);
    for (int64_t p = 0; p < positions; ++p) {
      const double angle = static_cast<double>(p) * freq;
      t.cos[static_cast<size_t>(p * half + i)] = static_cast<float>(std::cos(angle));
      t.sin[static_cast<size_t>(p * half + i)] = static_cast<float>(std::sin(angle));
    }
  }
  return t;
}

}  // namespace meshloom::model
