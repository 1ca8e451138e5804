// The GPU's fused, chunked LM loss (kernels/host/model/device_lm_loss.hpp over the
// kernels of kernels/device/ops/lm_loss.hpp) against the CPU's (model::LmLoss
// in double) on the same inputs: every token's loss, the loss sum and count,
// d(xf) and d(head) after backward(scale) (d(head) accumulated into what is
// there). One chunk; several with a shorter last one; chunks of one token;
// tokens without a target; a head shard whose rows start past 0 (what a TP
// rank holds; alone, its softmax is over its rows, the same on both sides),
// with targets that other shards hold. fp32 to 1e-5 of the largest value,
// bf16 to 1e-2.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/host/model/device_lm_loss.hpp"
#include "model/lm_loss.hpp"
#include "tests/kernels/device/ops/ops_test_util.hpp"
#include "tests/kernels/gpu_test.hpp"

namespace meshloom::cuda::test {
namespace {

struct LossCase {
  int64_t n, rows, first, d, chunk;
  uint32_t seed;
};

// Targets over a vocabulary wider than the shard (other shards' rows too),
// every fifth token without one.
std::vector<int32_t> random_targets(const LossCase& c) {
  std::mt19937 rng(c.seed);
  std::vector<int32_t> t(size_t(c.n));
  const uint32_t vocab = uint32_t(c.first + c.rows + 7);
  for (size_t i = 0; i < t.size(); ++i) t[i] = i % 5 == 3 ? -1 : int32_t(rng() % vocab);
  return t;
}

template <class T>
void check_lm_loss(const LossCase& c) {
  const double tol = Elem<T>::kTolerance, scale = 1.0 / 77;
  const std::vector<double> xf = random_values<T>(c.n * c.d, 1.0, c.seed);
  const std::vector<double> head = random_values<T>(c.rows * c.d, 0.5, c.seed + 1);
  const std::vector<int32_t> targets = random_targets(c);

  model::LmLoss<double> cpu({.chunk = c.chunk, .threads = 1});
  model::WholeVocab whole;
  std::vector<double> want_loss(size_t(c.n)), want_dxf(size_t(c.n * c.d));
  std::vector<double> want_dhead(size_t(c.rows * c.d), 0.25);
  const model::LossSum want = cpu.forward(xf.data(), c.n, {head.data(), c.first, c.rows, c.d},
                                          targets.data(), whole, want_loss);
  cpu.backward(scale, want_dxf.data(), want_dhead.data());

  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  {
    Blas blas(stream);
    DeviceValues<T> d_xf(xf), d_head(head), d_dxf(std::vector<double>(size_t(c.n * c.d)));
    DeviceBuffer<int32_t> d_targets(targets);
    DeviceBuffer<double> row_loss(size_t(c.n)), loss_sum(1);
    DeviceBuffer<int64_t> count(1);
    DeviceBuffer<float> d_dhead(std::vector<float>(size_t(c.rows * c.d), 0.25f));
    DeviceLmLoss<T> loss(c.chunk, blas, stream);
    loss.forward(d_xf.data(), c.n, DeviceHead<T>{d_head.data(), {c.first, c.rows}, c.d},
                 d_targets.data(), nullptr, row_loss.data());
    lm_loss_total(row_loss.data(), d_targets.data(), c.n, loss_sum.data(), count.data(), stream);
    loss.backward(float(scale), d_dxf.data(), d_dhead.data());
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);

    EXPECT_EQ(count.download()[0], want.count);
    EXPECT_NEAR(loss_sum.download()[0], want.sum, tol * std::abs(want.sum));
    EXPECT_LE(max_rel_error(row_loss.download(), want_loss), tol) << "token losses";
    EXPECT_LE(max_rel_error(d_dxf.download(), want_dxf), tol) << "d(xf)";
    EXPECT_LE(max_rel_error(to_double(d_dhead.download()), want_dhead), tol) << "d(head)";
  }
  cudaStreamDestroy(stream);
}

constexpr LossCase kOneChunk{300, 1000, 0, 64, 1024, 11};
constexpr LossCase kUnevenChunks{300, 1000, 0, 64, 128, 12};  // 128, 128, 44
constexpr LossCase kTokenChunks{37, 513, 0, 96, 1, 13};
constexpr LossCase kShard{200, 777, 500, 64, 64, 14};  // rows [500, 1277) of more

TEST(LmLossGpu, Fp32MatchesTheCpuLoss) {
  ML_REQUIRE_GPU();
  for (const LossCase& c : {kOneChunk, kUnevenChunks, kTokenChunks, kShard})
    check_lm_loss<float>(c);
}

TEST(LmLossGpu, Bf16MatchesTheCpuLoss) {
  ML_REQUIRE_GPU();
  for (const LossCase& c : {kOneChunk, kUnevenChunks, kShard}) check_lm_loss<bf16>(c);
}

}  // namespace
}  // namespace meshloom::cuda::test
