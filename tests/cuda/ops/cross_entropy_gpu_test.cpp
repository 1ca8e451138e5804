// GPU fused cross-entropy (cuda/kernels/ops/cross_entropy.hpp) against a
// double-precision reference of the CPU's cross_entropy_row (private to
// lib/model/transformer.cpp): per-row −log softmax, the loss sum and count,
// and (softmax − onehot)·scale, zero rows for target −1. GPT-2's vocabulary
// (50257, odd), padded leading dimensions (padding must stay untouched), in
// place and out of place, a peaked row, fp32 and bf16.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "cuda/kernels/ops/cross_entropy.hpp"
#include "tests/cuda/gpu_test.hpp"
#include "tests/cuda/ops/ops_test_util.hpp"

namespace meshloom::kernels::test {
namespace {

struct CeRef {
  std::vector<double> row_loss, dlogits;  // dlogits dense [n, V]
  double sum = 0;
  int64_t count = 0;
};

CeRef reference(const std::vector<double>& z, int64_t ld, const std::vector<int32_t>& targets,
                int64_t V, double scale) {
  const int64_t n = int64_t(targets.size());
  CeRef r{std::vector<double>(size_t(n)), std::vector<double>(size_t(n * V)), 0, 0};
  for (int64_t i = 0; i < n; ++i) {
    const int32_t target = targets[size_t(i)];
    if (target < 0) continue;
    const double* row = z.data() + i * ld;
    double mx = row[0], sum = 0;
    for (int64_t c = 0; c < V; ++c) mx = std::max(mx, row[c]);
    for (int64_t c = 0; c < V; ++c) sum += std::exp(row[c] - mx);
    for (int64_t c = 0; c < V; ++c)
      r.dlogits[size_t(i * V + c)] =
          (std::exp(row[c] - mx) / sum - (c == target ? 1.0 : 0.0)) * scale;
    r.row_loss[size_t(i)] = std::log(sum) - (row[target] - mx);
    r.sum += r.row_loss[size_t(i)];
    ++r.count;
  }
  return r;
}

template <class T>
void check_cross_entropy(int64_t n, int64_t V, int64_t ld, int64_t ld_out, bool in_place,
                         double scale, uint32_t seed) {
  SCOPED_TRACE(testing::Message() << Elem<T>::kName << " n=" << n << " V=" << V << " ld=" << ld
                                  << " ld_out=" << ld_out << " in_place=" << in_place);
  if (in_place) {
    ASSERT_EQ(ld, ld_out);
  }
  std::vector<double> z = random_values<T>(n * ld, 2.0, seed);
  z[5] = 60.0;  // a peaked first row (exact in bf16)
  std::vector<int32_t> targets(static_cast<size_t>(n));
  std::mt19937 rng(seed + 1);
  for (int64_t i = 0; i < n; ++i) targets[size_t(i)] = int32_t(rng() % uint32_t(V));
  for (int64_t i = 1; i < n; i += 3) targets[size_t(i)] = -1;  // no prediction
  if (n > 2) targets[2] = int32_t(V - 1);                      // the last column
  const CeRef ref = reference(z, ld, targets, V, scale);

  DeviceValues<T> logits(z);
  const std::vector<double> out_init(size_t(n * ld_out), 3.0);
  DeviceValues<T> out_buf(in_place ? std::vector<double>() : out_init);
  T* out = in_place ? logits.data() : out_buf.data();
  DeviceBuffer<int32_t> dtargets(targets);
  DeviceBuffer<double> row_loss(static_cast<size_t>(n)), loss_sum(1);
  DeviceBuffer<int64_t> count(1);
  double first_sum = 0;
  for (int run = 0; run < 2; ++run) {
    if (run == 1 && in_place) logits = DeviceValues<T>(z);  // the first run overwrote it
    if (in_place) out = logits.data();
    cross_entropy<T>(logits.data(), ld, dtargets.data(), n, V, float(scale), out, ld_out,
                     row_loss.data(), loss_sum.data(), count.data(), nullptr);
    const double sum = loss_sum.download()[0];
    if (run == 0) {
      first_sum = sum;
    } else {
      EXPECT_EQ(sum, first_sum) << "the loss sum is not deterministic";
    }
  }
  EXPECT_EQ(count.download()[0], ref.count);
  EXPECT_NEAR(loss_sum.download()[0], ref.sum, 1e-5 * std::abs(ref.sum));
  EXPECT_LE(max_rel_error(row_loss.download(), ref.row_loss), 1e-5) << "row losses";

  const std::vector<double> got = in_place ? logits.download() : out_buf.download();
  std::vector<double> dense(size_t(n * V));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t c = 0; c < V; ++c) dense[size_t(i * V + c)] = got[size_t(i * ld_out + c)];
    for (int64_t c = V; c < ld_out; ++c) {
      const double before = in_place ? z[size_t(i * ld + c)] : 3.0;
      ASSERT_EQ(got[size_t(i * ld_out + c)], before) << "padding written, row " << i;
    }
    if (targets[size_t(i)] >= 0) continue;
    for (int64_t c = 0; c < V; ++c) ASSERT_EQ(dense[size_t(i * V + c)], 0.0) << "row " << i;
  }
  EXPECT_LE(max_rel_error(dense, ref.dlogits), Elem<T>::kTolerance) << "dlogits";
}

TEST(CrossEntropyGpu, Fp32MatchesTheReference) {
  ML_REQUIRE_GPU();
  check_cross_entropy<float>(1, 50257, 50257, 50257, true, 1.0, 71);
  check_cross_entropy<float>(37, 50257, 50257 + 3, 50257 + 3, true, 1.0 / 1234, 72);
  check_cross_entropy<float>(7, 1000, 1000, 1001, false, 1.0, 73);
  check_cross_entropy<float>(333, 1000, 1003, 1000, false, 1.0 / 333, 74);
}

TEST(CrossEntropyGpu, Bf16MatchesTheReference) {
  ML_REQUIRE_GPU();
  check_cross_entropy<bf16>(1, 50257, 50257, 50257, true, 1.0, 81);
  check_cross_entropy<bf16>(37, 50257, 50257 + 3, 50257 + 3, true, 1.0 / 1234, 82);
  check_cross_entropy<bf16>(7, 1000, 1000, 1001, false, 1.0, 83);
  check_cross_entropy<bf16>(333, 1000, 1003, 1000, false, 1.0 / 333, 84);
}

TEST(CrossEntropyGpu, AllRowsWithoutTargetsGiveZero) {
  ML_REQUIRE_GPU();
  const int64_t n = 5, V = 77;
  DeviceValues<float> logits(random_values<float>(n * V, 1.0, 91));
  DeviceBuffer<int32_t> targets(std::vector<int32_t>(size_t(n), -1));
  DeviceBuffer<double> row_loss(static_cast<size_t>(n)), loss_sum(1);
  DeviceBuffer<int64_t> count(1);
  cross_entropy<float>(logits.data(), V, targets.data(), n, V, 1.0f, logits.data(), V,
                       row_loss.data(), loss_sum.data(), count.data(), nullptr);
  EXPECT_EQ(loss_sum.download()[0], 0.0);
  EXPECT_EQ(count.download()[0], 0);
  for (double v : logits.download()) ASSERT_EQ(v, 0.0);
}

}  // namespace
}  // namespace meshloom::kernels::test
