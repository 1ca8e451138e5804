// RoPE's per-position table (lib/model/rope_angles.hpp), which the GPU
// uploads: each entry is the double angle p·θ^(−2i/D) the CPU model uses,
// rounded once to float, at small and long-context positions.
#include "model/rope_angles.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

namespace meshloom::model {
namespace {

TEST(RopeAngles, FrequenciesFollowTheFormula) {
  EXPECT_EQ(rope_frequency(0, 128, 10000.0), 1.0);
  EXPECT_DOUBLE_EQ(rope_frequency(32, 128, 10000.0), 0.01);  // 10000^(−1/2)
  EXPECT_DOUBLE_EQ(rope_frequency(1, 4, 500000.0), 1.0 / std::sqrt(500000.0));
}

TEST(RopeAngles, TableHoldsTheDoubleAnglesRoundedToFloat) {
  for (const double theta : {10000.0, 500000.0}) {
    const int64_t D = 96, half = D / 2, positions = 70333;
    const RopeTable t = rope_table(positions, D, theta);
    ASSERT_EQ(t.cos.size(), size_t(positions * half));
    ASSERT_EQ(t.sin.size(), t.cos.size());
    for (const int64_t p : {int64_t(0), int64_t(1), int64_t(7), int64_t(4095), positions - 1}) {
      for (int64_t i = 0; i < half; ++i) {
        const double angle = double(p) * std::pow(theta, -2.0 * double(i) / double(D));
        const size_t at = size_t(p * half + i);
        ASSERT_EQ(t.cos[at], float(std::cos(angle))) << "p=" << p << " i=" << i;
        ASSERT_EQ(t.sin[at], float(std::sin(angle))) << "p=" << p << " i=" << i;
      }
    }
    // Position 0 does not turn; pair 0 turns by the position itself.
    for (int64_t i = 0; i < half; ++i) {
      EXPECT_EQ(t.cos[size_t(i)], 1.0f);
      EXPECT_EQ(t.sin[size_t(i)], 0.0f);
    }
    EXPECT_EQ(t.sin[size_t(3 * half)], float(std::sin(3.0)));
  }
}

// Hugging Face's rope_scaling, on Llama 3.1's settings (theta 500000, D 128,
// factor 8, low 1, high 4, original 8192): wavelengths below 8192 / 4 = 2048
// keep their frequency, those above 8192 / 1 are divided by 8, and between
// the two the frequency blends smoothly.
TEST(RopeAngles, ScaledFrequencies) {
  config::RopeScalingConfig linear;
  linear.type = config::RopeScaling::linear;
  linear.factor = 4;
  for (int64_t i : {0, 5, 63})
    EXPECT_EQ(rope_frequency(i, 128, 500000.0, linear), rope_frequency(i, 128, 500000.0) / 4);
  config::RopeScalingConfig l3;
  l3.type = config::RopeScaling::llama3;
  l3.factor = 8;
  l3.low_freq_factor = 1;
  l3.high_freq_factor = 4;
  l3.original_max_position_embeddings = 8192;
  int kept = 0, divided = 0, blended = 0;
  double last = 1e300;
  for (int64_t i = 0; i < 64; ++i) {
    const double f = rope_frequency(i, 128, 500000.0), g = rope_frequency(i, 128, 500000.0, l3);
    const double wavelength = 2 * std::numbers::pi / f;
    if (wavelength < 2048) {
      EXPECT_EQ(g, f) << i;
      ++kept;
    } else if (wavelength > 8192) {
      EXPECT_EQ(g, f / 8) << i;
      ++divided;
    } else {
      EXPECT_GT(g, f / 8) << i;
      EXPECT_LT(g, f) << i;
      ++blended;
    }
    EXPECT_LT(g, last) << "frequencies fall with i";
    last = g;
  }
  EXPECT_GT(kept, 0);
  EXPECT_GT(divided, 0);
  EXPECT_GT(blended, 0);
  // The table uses the scaled frequencies.
  const RopeTable t = rope_table(3, 128, 500000.0, l3);
  EXPECT_EQ(t.sin[size_t(2 * 64 + 63)], float(std::sin(2 * rope_frequency(63, 128, 500000.0, l3))));
}

TEST(RopeAngles, EmptyTable) {
  const RopeTable t = rope_table(0, 64, 10000.0);
  EXPECT_TRUE(t.cos.empty());
  EXPECT_TRUE(t.sin.empty());
}

}  // namespace
}  // namespace meshloom::model
