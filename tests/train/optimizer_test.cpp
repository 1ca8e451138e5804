#include "train/optimizer.hpp"

#include <gtest/gtest.h>

#include <cmath>

using namespace meshloom;

TEST(Schedule, WarmupThenCosineToMinLr) {
  config::OptimConfig o;
  o.lr = 1.0;
  o.min_lr = 0.1;
  o.warmup_steps = 4;
  EXPECT_DOUBLE_EQ(train::learning_rate(o, 0, 100), 0.25);
  EXPECT_DOUBLE_EQ(train::learning_rate(o, 3, 100), 1.0);
  EXPECT_NEAR(train::learning_rate(o, 4, 100), 1.0, 1e-12);
  EXPECT_NEAR(train::learning_rate(o, 99, 100), 0.1, 1e-12);
  // Halfway through the decay: the mean of lr and min_lr.
  EXPECT_NEAR(train::learning_rate(o, 4 + 95 / 2.0, 100), 0.55, 0.02);
}

TEST(Clip, ScalesOnlyAboveTheLimit) {
  EXPECT_DOUBLE_EQ(train::clip_scale(0.5, 1.0), 1.0);
  EXPECT_NEAR(train::clip_scale(4.0, 1.0), 0.25, 1e-6);
  EXPECT_DOUBLE_EQ(train::clip_scale(4.0, 0.0), 1.0);
}

// Against AdamW written out in double for a few steps, decay on half the buffer.
TEST(AdamW, MatchesTheDefinition) {
  config::OptimConfig o;
  o.beta1 = 0.9;
  o.beta2 = 0.95;
  o.eps = 1e-8;
  o.weight_decay = 0.1;
  const int n = 6;
  std::vector<float> p = {0.5f, -1.0f, 2.0f, 0.1f, -0.3f, 0.7f};
  std::vector<double> pd(p.begin(), p.end()), m(n, 0), v(n, 0);
  train::AdamW opt(o, 0, n, {{0, 3}});
  for (int t = 1; t <= 5; ++t) {
    std::vector<float> g(n);
    for (int i = 0; i < n; ++i) g[i] = float(std::sin(1.0 + i * t));
    const double lr = 0.01 * t, scale = 0.5;
    opt.update(p.data(), g.data(), lr, scale);
    for (int i = 0; i < n; ++i) {
      double gi = double(g[i]) * scale;
      m[i] = 0.9 * m[i] + 0.1 * gi;
      v[i] = 0.95 * v[i] + 0.05 * gi * gi;
      double mh = m[i] / (1 - std::pow(0.9, t)), vh = v[i] / (1 - std::pow(0.95, t));
      pd[i] -= lr * (mh / (std::sqrt(vh) + 1e-8) + (i < 3 ? 0.1 * pd[i] : 0.0));
    }
  }
  for (int i = 0; i < n; ++i) EXPECT_NEAR(p[i], pd[i], 1e-5) << i;
}

// A shard updates exactly like the same elements of the whole buffer (ZeRO-1).
TEST(AdamW, ShardEqualsSliceOfWhole) {
  config::OptimConfig o;
  std::vector<float> whole(10), shard_params(10);
  for (int i = 0; i < 10; ++i) whole[i] = shard_params[i] = 0.1f * float(i) - 0.4f;
  std::vector<float> g(10);
  for (int i = 0; i < 10; ++i) g[i] = 0.05f * float(i * i % 7) - 0.1f;
  train::AdamW full(o, 0, 10, {{2, 8}});
  train::AdamW part(o, 4, 10, {{2, 8}});
  for (int t = 0; t < 3; ++t) {
    full.update(whole.data(), g.data(), 0.01, 1.0);
    part.update(shard_params.data() + 4, g.data() + 4, 0.01, 1.0);
  }
  for (int i = 4; i < 10; ++i) EXPECT_FLOAT_EQ(whole[i], shard_params[i]);
}
