// RoPE's angles, shared by the CPU model (per-token tables) and the GPU (one
// per-position table): angle(p, i) = p · θ^(−2i/D), computed in double.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace meshloom::model {

// θ^(−2i/D), the i-th pair's frequency (i < D/2).
inline double rope_frequency(int64_t i, int64_t head_dim, double theta) {
  return std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
}

// cos and sin of every position's angles, [positions, D/2] each, rounded to
// float from double: the values the CPU model rounds its tables to.
struct RopeTable {
  std::vector<float> cos, sin;
};

inline RopeTable rope_table(int64_t positions, int64_t head_dim, double theta) {
  const int64_t half = head_dim / 2;
  RopeTable t;
  t.cos.resize(static_cast<size_t>(positions * half));
  t.sin.resize(t.cos.size());
  for (int64_t i = 0; i < half; ++i) {
    const double freq = rope_frequency(i, head_dim, theta);
    for (int64_t p = 0; p < positions; ++p) {
      const double angle = static_cast<double>(p) * freq;
      t.cos[static_cast<size_t>(p * half + i)] = static_cast<float>(std::cos(angle));
      t.sin[static_cast<size_t>(p * half + i)] = static_cast<float>(std::sin(angle));
    }
  }
  return t;
}

}  // namespace meshloom::model
