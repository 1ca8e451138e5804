// The GPU model against the CPU model (the definition), on the same
// parameters and the same packed multi-document micro-batch: loss, every
// token's loss and the gradient of every parameter tensor, tied and untied
// embeddings, GQA. The fp32 path (true fp32 products and kernels) must agree
// with the CPU in double to 1e-4 of each tensor's largest gradient (fp32
// round-off through two layers); the bf16 path (bf16 weights and
// activations, fp32 accumulation) to 5e-2. The fused LM loss gives the same
// whatever its chunk (one chunk, or several and a shorter last one).
#include <cuda_bf16.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "kernels/host/model/transformer.hpp"
#include "model/transformer.hpp"
#include "tests/kernels/gpu_test.hpp"
#include "tests/kernels/host/model/model_test_util.hpp"

namespace {

using namespace meshloom;
using model::Batch;
using model::Shape;
using namespace cuda::test;

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
    cuda::Transformer<T> gpu(s, stream, loss_chunk);
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

TEST(CudaTransformer, Fp32MatchesTheCpuModelTied) {
  ML_REQUIRE_GPU();
  compare<float>(true, 1e-4);
}

TEST(CudaTransformer, Fp32MatchesTheCpuModelUntied) {
  ML_REQUIRE_GPU();
  compare<float>(false, 1e-4);
}

TEST(CudaTransformer, Fp32MatchesTheCpuModelInLossChunks) {
  ML_REQUIRE_GPU();
  compare<float>(true, 1e-4, 100);  // 257 tokens: chunks of 100, 100 and 57
}

TEST(CudaTransformer, Bf16MatchesTheCpuModel) {
  ML_REQUIRE_GPU();
  compare<__nv_bfloat16>(false, 5e-2);
}

// Selective offloading moves activations, never changes them: the loss and
// gradients with 1 or 3 of 5 layers' activations waiting in host memory
// equal those with none (to the last bits the attention's atomics allow).
TEST(CudaTransformer, OffloadingGivesTheSameGradients) {
  ML_REQUIRE_GPU();
  Shape s = small_shape(false);
  s.n_layers = 5;
  const model::ParamLayout layout(s);
  const std::vector<float> params = random_params(layout);
  const Batch batch = packed_batch(s.vocab);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  {
    cuda::Transformer<float> gpu(s, stream);
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

namespace {

// The stage's output() or input_grad(), [n, d], copied before the next call.
cuda::DeviceBuffer<float> keep(const float* values, int64_t count, cudaStream_t stream) {
  cuda::DeviceBuffer<float> b(static_cast<size_t>(count));
  EXPECT_EQ(cudaMemcpyAsync(b.data(), values, size_t(count) * sizeof(float),
                            cudaMemcpyDeviceToDevice, stream),
            cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  return b;
}

// Stages [2, 1, 2] of a 5-layer model, two micro-batches in flight 1F1B's
// way (both forwards before either backward, the parked activations swapped
// in and out), give the whole model's loss and gradients; with tied
// embeddings the first and last stage's embedding gradients add up to it.
void compare_stages(bool tied) {
  Shape s = small_shape(tied);
  s.n_layers = 5;
  const model::ParamLayout whole_layout(s);
  const std::vector<float> params = random_params(whole_layout);
  const Batch a = packed_batch(s.vocab);
  std::vector<int32_t> tokens(a.tokens.begin(), a.tokens.begin() + 150);
  for (auto& t : tokens) t = int32_t((t * 7 + 3) % s.vocab);
  const std::vector<int32_t> lengths = {90, 60};
  const Batch b = Batch::pack(tokens, lengths);
  const double scale = 1.0 / double(a.predictions() + b.predictions());
  const int64_t d = s.d_model;
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  {
    cuda::Transformer<float> whole(s, stream);
    whole.set_params(params);
    whole.zero_grads();
    double want_loss = whole.forward(a).sum;
    whole.backward(scale);
    want_loss += whole.forward(b).sum;
    whole.backward(scale);
    const std::vector<float> want = whole.download_grads();

    const std::vector<model::StageLayers> ranges = {{0, 2}, {2, 3}, {3, 5}};
    std::vector<std::unique_ptr<cuda::Transformer<float>>> stages;
    for (const model::StageLayers& r : ranges) {
      stages.push_back(std::make_unique<cuda::Transformer<float>>(s, stream, 1024, model::TpShard{},
                                                                  nullptr, r));
      // The stage's tensors, by name, out of the whole model's.
      std::vector<float> mine(size_t(stages.back()->layout().numel()));
      for (const model::TensorInfo& t : stages.back()->layout().tensors()) {
        const auto from = params.begin() + whole_layout.find(t.name).offset;
        std::copy(from, from + t.numel, mine.begin() + t.offset);
      }
      stages.back()->set_params(mine);
      stages.back()->zero_grads();
    }
    using Saved = cuda::Transformer<float>::Saved;
    Saved parked[2][2];  // [stage][micro-batch]
    const Batch* batch[2] = {&a, &b};
    cuda::DeviceBuffer<float> x[2], dx[2];
    for (int s_ = 0; s_ < 2; ++s_)
      for (int m = 0; m < 2; ++m) {
        stages[size_t(s_)]->forward(*batch[m], nullptr, 0, s_ == 0 ? nullptr : x[m].data());
        x[m] = keep(stages[size_t(s_)]->output(), batch[m]->size() * d, stream);
        stages[size_t(s_)]->swap_saved(parked[s_][m]);
      }
    double loss = 0;
    for (int m = 0; m < 2; ++m) {
      loss += stages[2]->forward(*batch[m], nullptr, 0, x[m].data()).sum;
      stages[2]->backward(scale);
      dx[m] = keep(stages[2]->input_grad(), batch[m]->size() * d, stream);
    }
    EXPECT_NEAR(loss, want_loss, 1e-5 * std::abs(want_loss));
    for (int s_ = 1; s_ >= 0; --s_)
      for (int m : {1, 0}) {  // the other order than forward's
        stages[size_t(s_)]->swap_saved(parked[s_][m]);
        EXPECT_EQ(stages[size_t(s_)]->tokens(), batch[m]->size());
        stages[size_t(s_)]->backward(1.0, {}, dx[m].data());
        if (s_ > 0) dx[m] = keep(stages[size_t(s_)]->input_grad(), batch[m]->size() * d, stream);
      }
    // Every stage's gradients placed in the whole model's layout, summed.
    std::vector<double> got(want.size(), 0.0);
    for (const auto& stage : stages) {
      const std::vector<float> g = stage->download_grads();
      for (const model::TensorInfo& t : stage->layout().tensors()) {
        const int64_t at = whole_layout.find(t.name).offset;
        for (int64_t i = 0; i < t.numel; ++i) got[size_t(at + i)] += g[size_t(t.offset + i)];
      }
    }
    for (const model::TensorInfo& t : whole_layout.tensors()) {
      double err = 0, scale_ref = 0;
      for (int64_t i = 0; i < t.numel; ++i) {
        const double ref = want[size_t(t.offset + i)];
        err = std::max(err, std::abs(got[size_t(t.offset + i)] - ref));
        scale_ref = std::max(scale_ref, std::abs(ref));
      }
      EXPECT_LE(err, 1e-5 * scale_ref) << t.name << " (largest gradient " << scale_ref << ")";
    }
  }
  cudaStreamDestroy(stream);
}

}  // namespace

TEST(CudaTransformer, PipelineStagesGiveTheWholeModelTied) {
  ML_REQUIRE_GPU();
  compare_stages(true);
}

TEST(CudaTransformer, PipelineStagesGiveTheWholeModelUntied) {
  ML_REQUIRE_GPU();
  compare_stages(false);
}
