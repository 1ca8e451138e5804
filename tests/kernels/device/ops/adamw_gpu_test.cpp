// GPU AdamW and gradient norm (kernels/device/ops/adamw.hpp) against the CPU
// optimizer itself (train::AdamW, learning_rate, clip_scale): several steps of
// the warmup/cosine schedule with clipping, decay on some ranges only; master
// weights, m and v must match (bit for bit with a host-given grad scale: same
// fp32 operations in the same order), the bf16 copy must be the master
// rounded, and the sum of squares must be deterministic.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "config/config.hpp"
#include "kernels/device/ops/adamw.hpp"
#include "tests/kernels/device/ops/ops_test_util.hpp"
#include "tests/kernels/gpu_test.hpp"
#include "train/optimizer.hpp"

namespace meshloom::cuda::test {
namespace {

TEST(AdamWDecayMask, MarksTheOwnedPartOfEachRange) {
  const std::vector<std::pair<int64_t, int64_t>> ranges = {{0, 3}, {5, 7}, {9, 20}};
  EXPECT_EQ(adamw_decay_mask(2, 11, ranges), (std::vector<uint8_t>{1, 0, 0, 1, 1, 0, 0, 1, 1}));
  EXPECT_TRUE(adamw_decay_mask(4, 4, ranges).empty());
}

// Runs `steps` optimizer steps on the CPU and the GPU from the same state.
// device_scale: the GPU computes Σg², the clip scale and uses it on the
// device; otherwise it gets the CPU's grad scale (then results are exact).
void check_adamw(int64_t n, int steps, bool device_scale) {
  SCOPED_TRACE(testing::Message() << "n=" << n << " device_scale=" << device_scale);
  const config::OptimConfig o = adamw_test_config();
  const std::vector<std::pair<int64_t, int64_t>> decay = {{0, n / 3}, {n / 2, n - 1}};
  train::AdamW cpu(o, 0, n, decay);
  std::vector<float> master = random_floats(n, 0.02f, 101);

  DeviceBuffer<float> d_master(master), d_m(static_cast<size_t>(n)), d_v(static_cast<size_t>(n)),
      d_grads(static_cast<size_t>(n));
  d_m.zero();
  d_v.zero();
  DeviceBuffer<uint8_t> d_decay(adamw_decay_mask(0, n, decay));
  DeviceBuffer<uint16_t> d_bf16(static_cast<size_t>(n));
  DeviceBuffer<double> d_sum_sq(1), d_norm(1);
  DeviceBuffer<float> d_scale(1);
  const AdamWHyper hyper{o.beta1, o.beta2, o.eps, o.weight_decay};

  for (int step = 0; step < steps; ++step) {
    // Gradients large on odd steps (clipped), small on even ones (not).
    const std::vector<float> grads = random_floats(n, step % 2 ? 0.05f : 1e-4f, 200 + step);
    double sq = 0;
    for (float g : grads) sq += double(g) * double(g);
    const double lr = train::learning_rate(o, step, steps);
    const double gs = train::clip_scale(std::sqrt(sq), o.grad_clip);
    cpu.update(master.data(), grads.data(), lr, gs);

    d_grads.upload(grads);
    grad_sum_squares(d_grads.data(), n, d_sum_sq.data(), nullptr);
    const double gpu_sq = d_sum_sq.download()[0];
    EXPECT_NEAR(gpu_sq, sq, 1e-12 * sq) << "step " << step;
    grad_sum_squares(d_grads.data(), n, d_sum_sq.data(), nullptr);
    EXPECT_EQ(d_sum_sq.download()[0], gpu_sq) << "the sum of squares is not deterministic";
    clip_scale_device(d_sum_sq.data(), o.grad_clip, d_scale.data(), d_norm.data(), nullptr);
    EXPECT_NEAR(d_norm.download()[0], std::sqrt(sq), 1e-12 * std::sqrt(sq));
    EXPECT_NEAR(d_scale.download()[0], float(gs), 1e-6 * gs);
    if (step % 2 == 0) {
      EXPECT_EQ(d_scale.download()[0], 1.0f) << "small gradients are not clipped";
    }

    adamw_update(d_master.data(), d_m.data(), d_v.data(), d_grads.data(), d_decay.data(), n,
                 cpu.step(), lr, gs, device_scale ? d_scale.data() : nullptr, hyper,
                 reinterpret_cast<bf16*>(d_bf16.data()), nullptr);
  }
  const std::vector<float> got = d_master.download(), m = d_m.download(), v = d_v.download();
  EXPECT_LE(max_rel_error(to_double(got), to_double(master)), 1e-5) << "master";
  EXPECT_LE(max_rel_error(to_double(m), to_double(cpu.m())), 1e-5) << "m";
  EXPECT_LE(max_rel_error(to_double(v), to_double(cpu.v())), 1e-5) << "v";
  if (!device_scale) {
    EXPECT_EQ(got, master) << "fp32 master weights differ from the CPU's bit for bit";
    EXPECT_EQ(m, cpu.m());
    EXPECT_EQ(v, cpu.v());
  }
  const std::vector<uint16_t> copy = d_bf16.download();
  for (size_t i = 0; i < copy.size(); ++i)
    ASSERT_EQ(copy[i], Elem<bf16>::encode(got[i])) << "bf16 copy at " << i;
}

TEST(AdamWGpu, MatchesTheCpuOptimizer) {
  ML_REQUIRE_GPU();
  check_adamw(10007, 6, false);
  check_adamw(10007, 6, true);
  check_adamw(1, 3, false);
  check_adamw(1 << 20, 3, true);
}

TEST(AdamWGpu, NoDecayMaskMeansNoDecay) {
  ML_REQUIRE_GPU();
  const int64_t n = 333;
  config::OptimConfig o;
  train::AdamW cpu(o, 0, n, {});
  std::vector<float> master = random_floats(n, 1.0f, 7);
  const std::vector<float> grads = random_floats(n, 1.0f, 8);
  DeviceBuffer<float> d_master(master), d_m(static_cast<size_t>(n)), d_v(static_cast<size_t>(n)),
      d_grads(grads);
  d_m.zero();
  d_v.zero();
  cpu.update(master.data(), grads.data(), 1e-3, 0.5);
  adamw_update(d_master.data(), d_m.data(), d_v.data(), d_grads.data(), nullptr, n, 1, 1e-3, 0.5,
               nullptr, AdamWHyper{o.beta1, o.beta2, o.eps, o.weight_decay}, nullptr, nullptr);
  EXPECT_LE(max_rel_error(to_double(d_master.download()), to_double(master)), 1e-5);
}

}  // namespace
}  // namespace meshloom::cuda::test
