// The GPU model against the CPU model (the definition), on the same
// parameters and the same packed multi-document micro-batch: loss, every
// token's loss and the gradient of every parameter tensor, tied and untied
// embeddings, GQA. The fp32 path (true fp32 products and kernels) must agree
// with the CPU in double to 1e-4 of each tensor's largest gradient (fp32
// round-off through two layers); the bf16 path (bf16 weights and
// activations, fp32 accumulation) to 5e-2. The fused LM loss gives the same
// whatever its chunk (one chunk, or several and a shorter last one).
#include "cuda/model/gpu_transformer.hpp"

#include <cuda_bf16.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "model/transformer.hpp"
#include "tests/cuda/gpu_test.hpp"
#include "tests/cuda/model/model_test_util.hpp"

namespace {

using namespace meshloom;
using model::Batch;
using model::Shape;
using namespace kernels::test;

template <class T>
void compare(bool tied, double tol, int64_t loss_chunk = 1024) {
  const Shape s = small_shape(tied);
  model::Transformer<double> cpu(s, {.threads = 1});
  const std::vector<float> params = random_params(cpu.layout());
  std::copy(params.begin(), params.end(), cpu.params().begin());
  const Batch batch = packed_batch(s.vocab);
  const double scale = 1.0 / double(batch.predictions());
  cpu.zero_grads();
  const model::LossSum want = cpu.forward(batch);
  cpu.backward(scale);

  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  {
    kernels::GpuTransformer<T> gpu(s, stream, loss_chunk);
    gpu.set_params(params);
    const std::vector<float> grads =
        run_against_cpu(gpu, batch, scale, want, cpu.token_losses(), tol).grads;
    for (const model::TensorInfo& t : cpu.layout().tensors()) {
      double err = 0, scale_ref = 0;
      for (int64_t i = 0; i < t.numel; ++i) {
        const double ref = cpu.grads()[size_t(t.offset + i)];
        err = std::max(err, std::abs(double(grads[size_t(t.offset + i)]) - ref));
        scale_ref = std::max(scale_ref, std::abs(ref));
      }
      EXPECT_LE(err, tol * scale_ref) << t.name << " (largest gradient " << scale_ref << ")";
    }
  }
  cudaStreamDestroy(stream);
}

}  // namespace

TEST(GpuTransformer, Fp32MatchesTheCpuModelTied) {
  ML_REQUIRE_GPU();
  compare<float>(true, 1e-4);
}

TEST(GpuTransformer, Fp32MatchesTheCpuModelUntied) {
  ML_REQUIRE_GPU();
  compare<float>(false, 1e-4);
}

TEST(GpuTransformer, Fp32MatchesTheCpuModelInLossChunks) {
  ML_REQUIRE_GPU();
  compare<float>(true, 1e-4, 100);  // 257 tokens: chunks of 100, 100 and 57
}

TEST(GpuTransformer, Bf16MatchesTheCpuModel) {
  ML_REQUIRE_GPU();
  compare<__nv_bfloat16>(false, 5e-2);
}

// Selective offloading moves activations, never changes them: the loss and
// gradients with 1 or 3 of 5 layers' activations waiting in host memory
// equal those with none (to the last bits the attention's atomics allow).
TEST(GpuTransformer, OffloadingGivesTheSameGradients) {
  ML_REQUIRE_GPU();
  Shape s = small_shape(false);
  s.n_layers = 5;
  const model::ParamLayout layout(s);
  const std::vector<float> params = random_params(layout);
  const Batch batch = packed_batch(s.vocab);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  {
    kernels::GpuTransformer<float> gpu(s, stream);
    gpu.set_params(params);
    std::vector<float> want;
    double want_loss = 0;
    for (int offloaded : {0, 3, 5, 0}) {
      gpu.zero_grads();
      const double loss = gpu.forward(batch, nullptr, offloaded).sum;
      gpu.backward(1.0 / double(batch.predictions()));
      const std::vector<float> grads = gpu.download_grads();
      if (want.empty()) {
        want = grads;
        want_loss = loss;
        continue;
      }
      EXPECT_NEAR(loss, want_loss, 1e-9 * std::abs(want_loss)) << "offloaded " << offloaded;
      double err = 0, scale_ref = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        err = std::max(err, double(std::abs(grads[i] - want[i])));
        scale_ref = std::max(scale_ref, double(std::abs(want[i])));
      }
      EXPECT_LE(err, 1e-6 * scale_ref) << "offloaded " << offloaded;
    }
  }
  cudaStreamDestroy(stream);
}
