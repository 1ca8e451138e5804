// CudnnDeviceAttention against the flash kernels (LocalDeviceAttention) on
// packed documents, bf16: forward out and lse, backward dq, dk, dv, within
// bf16 tolerance; and the fallback to the flash kernels where the mask is
// not documents from position 0. Skipped without a GPU, and where cuDNN
// attention cannot run (no cuDNN 9, not an sm_90): it has not run yet.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "kernels/host/model/attention_choice.hpp"
#include "kernels/host/model/cudnn_device_attention.hpp"
#include "tests/kernels/attention_test_util.hpp"
#include "tests/kernels/gpu_test.hpp"

namespace meshloom::cuda::test {
namespace {

using T = __nv_bfloat16;
constexpr double kTol = 3e-2;  // normalized max error, bf16 inputs and outputs

#define ML_REQUIRE_CUDNN()                                                         \
  do {                                                                             \
    ML_REQUIRE_GPU();                                                              \
    std::string ml_cudnn_why_;                                                     \
    if (!cudnn_attention_available(&ml_cudnn_why_)) GTEST_SKIP() << ml_cudnn_why_; \
  } while (0)

struct Results {
  std::vector<double> out, lse, dq, dk, dv;
};

// One forward and backward of `attn` over the block (pad: extra columns in
// every leading dimension, so the rows are strided as the fused QKV's are).
Results run(DeviceAttention<T>& attn, const FlashDims& dims, const Block& b) {
  const DeviceBlock<T> d(dims, b, 8);
  const int64_t n = b.n(), q_cols = dims.n_heads * dims.head_dim;
  const int64_t kv_cols = dims.n_kv_heads * dims.head_dim;
  DeviceBuf<T> out(n * q_cols);
  DeviceBuf<float> lse(n * dims.n_heads), dq(n * q_cols), dk(n * kv_cols), dv(n * kv_cols);
  attn.forward(0, dims, d.query(), d.keys(), FlashOut<T>{out.get(), q_cols, lse.get()}, nullptr);
  upload(dq, std::vector<double>(size_t(n * q_cols), 0.0));
  upload(dk, std::vector<double>(size_t(n * kv_cols), 0.0));
  upload(dv, std::vector<double>(size_t(n * kv_cols), 0.0));
  attn.backward(0, dims, d.query(), d.keys(), out.get(), q_cols, lse.get(), d.dout.get(), d.ldq,
                dq.get(), q_cols, FlashKvGrad{dk.get(), dv.get(), kv_cols, kv_cols}, nullptr);
  return {download(out), download(lse), download(dq), download(dk), download(dv)};
}

void expect_close(const Results& got, const Results& ref) {
  int64_t mismatches = 0;
  EXPECT_LE(rel_error(got.out, ref.out), kTol) << "out";
  EXPECT_LE(lse_error(got.lse, ref.lse, &mismatches), 1e-3) << "lse";
  EXPECT_EQ(mismatches, 0) << "lse: -inf on one side only";
  EXPECT_LE(rel_error(got.dq, ref.dq), kTol) << "dq";
  EXPECT_LE(rel_error(got.dk, ref.dk), kTol) << "dk";
  EXPECT_LE(rel_error(got.dv, ref.dv), kTol) << "dv";
}

class CudnnAttention : public ::testing::TestWithParam<FlashDims> {};

std::string shape_name(const ::testing::TestParamInfo<FlashDims>& p) {
  char name[64];
  std::snprintf(name, sizeof(name), "H%d_KV%d_D%d", p.param.n_heads, p.param.n_kv_heads,
                p.param.head_dim);
  return name;
}

TEST_P(CudnnAttention, MatchesTheFlashKernelsOnPackedDocuments) {
  ML_REQUIRE_CUDNN();
  const FlashDims dims = GetParam();
  const Block b = make_packed(dims, {1, 37, 130, 257, 600}, 11, /*round_bf16=*/true);
  LocalDeviceAttention<T> flash;
  CudnnDeviceAttention cudnn;
  const Results ref = run(flash, dims, b);
  const Results got = run(cudnn, dims, b);
  EXPECT_EQ(cudnn.cudnn_calls(), 2);
  EXPECT_EQ(cudnn.fallback_calls(), 0);
  expect_close(got, ref);
  // A second micro-batch of the same bucket reuses both plans.
  run(cudnn, dims, make_packed(dims, {500, 300, 200}, 12, true));
  EXPECT_EQ(cudnn.cached_plans(), 2u);
}

TEST_P(CudnnAttention, FallsBackToTheFlashKernelsWhereTheMaskIsNotDocuments) {
  ML_REQUIRE_CUDNN();
  const FlashDims dims = GetParam();
  const Block all = make_packed(dims, {90, 60}, 13, true);
  // A CP rank's zigzag: document 0's first and last chunks around document 1.
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < 30; ++i) rows.push_back(i);
  for (int64_t i = 90; i < 150; ++i) rows.push_back(i);
  for (int64_t i = 60; i < 90; ++i) rows.push_back(i);
  const Block b = take_rows(dims, all, rows);
  LocalDeviceAttention<T> flash;
  CudnnDeviceAttention cudnn;
  const Results ref = run(flash, dims, b);
  const Results got = run(cudnn, dims, b);
  EXPECT_EQ(cudnn.cudnn_calls(), 0);
  EXPECT_EQ(cudnn.fallback_calls(), 2);
  expect_close(got, ref);
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudnnAttention,
                         ::testing::Values(FlashDims{8, 2, 64}, FlashDims{8, 2, 128},
                                           FlashDims{4, 4, 128}, FlashDims{4, 1, 64}),
                         shape_name);

TEST(AttentionChoice, FlashWhereCudnnCannotRun) {
  std::string why;
  if (cudnn_attention_available(&why)) GTEST_SKIP() << "cuDNN attention can run here";
  EXPECT_FALSE(why.empty());
}

}  // namespace
}  // namespace meshloom::cuda::test
