// The optimizer's state on the GPU (kernels/host/train/device_adamw.hpp) against
// the CPU optimizer (train::AdamW) over several steps: the whole buffer and
// ZeRO-1 slices (moments for the slice only, the rest of the master weights
// untouched), a resume from saved moments, the bf16 working copy written in
// the same pass (the slice only), and the round trips to the host.
// With the grad scale given by the host the arithmetic is the CPU's, so the
// results must be equal bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "config/config.hpp"
#include "kernels/host/device_buffer.hpp"
#include "kernels/host/train/device_adamw.hpp"
#include "tests/kernels/device/ops/ops_test_util.hpp"
#include "tests/kernels/gpu_test.hpp"
#include "train/optimizer.hpp"

namespace meshloom::cuda::test {
namespace {

// `steps` updates of the slice [begin, end) of n parameters, on both sides;
// the device resumes from the CPU's state after `resume_at` steps.
void check_slice(int64_t n, int64_t begin, int64_t end, int steps, int resume_at) {
  SCOPED_TRACE(testing::Message() << "n=" << n << " slice [" << begin << ", " << end << ")");
  const config::OptimConfig o = adamw_test_config();
  const std::vector<std::pair<int64_t, int64_t>> decay = {{0, n / 3}, {n / 2, n - 1}};
  train::AdamW cpu(o, begin, end, decay);
  std::vector<float> master = random_floats(n, 0.02f, 11);
  const std::vector<float> initial = master;
  const AdamWHyper hyper{o.beta1, o.beta2, o.eps, o.weight_decay};
  DeviceAdamW gpu(n, n + 5, begin, end, hyper, decay, nullptr);
  gpu.load(master, {}, {}, 0);
  DeviceBuffer<float> grads(static_cast<size_t>(n));
  for (int step = 0; step < steps; ++step) {
    if (step == resume_at) {  // a fresh device optimizer from the CPU's state
      gpu = DeviceAdamW(n, n, begin, end, hyper, decay, nullptr);
      gpu.load(master, cpu.m(), cpu.v(), cpu.step());
    }
    const std::vector<float> g = random_floats(n, step % 2 ? 0.05f : 1e-4f, 300 + step);
    const double lr = train::learning_rate(o, step, steps);
    const double gs = step % 2 ? 0.5 : 1.0;
    cpu.update(master.data() + begin, g.data() + begin, lr, gs);
    grads.upload(g);
    gpu.update(grads.data(), lr, gs);
  }
  EXPECT_EQ(gpu.step(), cpu.step());
  std::vector<float> got(static_cast<size_t>(n));
  gpu.download_master(got);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(got[size_t(i)], master[size_t(i)]) << "master weight " << i;
    if (i < begin || i >= end) {
      ASSERT_EQ(got[size_t(i)], initial[size_t(i)]) << "weight " << i << " outside the slice";
    }
  }
  std::vector<float> m(static_cast<size_t>(end - begin)), v(m.size());
  gpu.download_moments(m, v);
  EXPECT_EQ(m, cpu.m());
  EXPECT_EQ(v, cpu.v());
}

TEST(DeviceAdamW, WholeBufferMatchesTheCpu) {
  ML_REQUIRE_GPU();
  check_slice(10007, 0, 10007, 5, -1);
}

TEST(DeviceAdamW, Zero1SlicesMatchTheCpu) {
  ML_REQUIRE_GPU();
  check_slice(10007, 0, 3336, 4, -1);
  check_slice(10007, 3336, 6672, 4, -1);
  check_slice(10007, 6672, 10007, 4, -1);  // the last, shorter slice
}

TEST(DeviceAdamW, ResumesFromSavedMoments) {
  ML_REQUIRE_GPU();
  check_slice(4099, 0, 4099, 6, 3);
  check_slice(4099, 1000, 2000, 6, 2);
}

// The fused refresh writes bf16(master) over [begin, end) of the working
// copy, as a separate conversion would, and nothing else.
TEST(DeviceAdamW, WritesTheBf16CopyOfItsSlice) {
  ML_REQUIRE_GPU();
  const int64_t n = 5003, begin = 1000, end = 4000;
  const config::OptimConfig o = adamw_test_config();
  const AdamWHyper hyper{o.beta1, o.beta2, o.eps, o.weight_decay};
  DeviceAdamW gpu(n, n, begin, end, hyper, {{0, n}}, nullptr);
  gpu.load(random_floats(n, 0.02f, 21), {}, {}, 0);
  DeviceBuffer<float> grads(random_floats(n, 0.05f, 22));
  const double untouched = 7.0;  // exact in bf16
  DeviceValues<bf16> copy(std::vector<double>(size_t(n), untouched));
  gpu.update(grads.data(), 1e-3, 1.0, copy.data());
  std::vector<float> master(static_cast<size_t>(n));
  gpu.download_master(master);
  const std::vector<double> got = copy.download();
  for (int64_t i = 0; i < n; ++i) {
    const double want = (i < begin || i >= end)
                            ? untouched
                            : Elem<bf16>::decode(Elem<bf16>::encode(master[size_t(i)]));
    ASSERT_EQ(got[size_t(i)], want) << "element " << i;
  }
}

TEST(DeviceAdamW, RefusesStateOfTheWrongSize) {
  ML_REQUIRE_GPU();
  set_fatal_handler(throwing_fatal_handler);
  DeviceAdamW gpu(100, 100, 10, 20, AdamWHyper{}, {}, nullptr);
  const std::vector<float> master(100, 0.0f), short_m(5, 0.0f), m(10, 0.0f);
  EXPECT_THROW(gpu.load(std::vector<float>(99), {}, {}, 0), Error);
  EXPECT_THROW(gpu.load(master, short_m, short_m, 1), Error);
  gpu.load(master, m, m, 1);
  EXPECT_EQ(gpu.step(), 1);
  EXPECT_THROW(DeviceAdamW(100, 100, 20, 10, AdamWHyper{}, {}, nullptr), Error);
}

}  // namespace
}  // namespace meshloom::cuda::test
