// Shared by the GPU model tests (against the CPU model): a small shape, a
// packed multi-document micro-batch, parameters away from the
// initialization, and a GPU run checked against the CPU model's loss.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <span>
#include <vector>

#include "kernels/host/model/transformer.hpp"
#include "model/batch.hpp"
#include "model/params.hpp"

namespace meshloom::cuda::test {

// Two layers, GQA (n_kv_heads < n_heads), head_dim 64 (what the GPU
// attention takes), a vocabulary that a TP group of 2 splits unevenly.
inline model::Shape small_shape(bool tied, int64_t n_heads = 2, int64_t n_kv_heads = 1) {
  model::Shape s;
  s.vocab = 301;
  s.head_dim = 64;
  s.n_heads = n_heads;
  s.n_kv_heads = n_kv_heads;
  s.d_model = n_heads * s.head_dim;
  s.n_layers = 2;
  s.ffn_dim = 200;
  s.tied = tied;
  return s;
}

inline model::Batch packed_batch(int64_t vocab) {
  const std::vector<int32_t> lengths = {1, 37, 70, 20, 129};
  const int32_t n = std::accumulate(lengths.begin(), lengths.end(), 0);
  std::mt19937 rng(11);
  std::vector<int32_t> tokens(static_cast<size_t>(n));
  for (auto& t : tokens) t = int32_t(rng() % uint32_t(vocab));
  return model::Batch::pack(tokens, lengths);
}

// Parameters away from the initialization, rounded to fp32 so that both
// backends see exactly the same values.
inline std::vector<float> random_params(const model::ParamLayout& layout) {
  std::mt19937 rng(5);
  std::normal_distribution<double> normal;
  std::vector<float> p(static_cast<size_t>(layout.numel()));
  for (const model::TensorInfo& t : layout.tensors())
    for (int64_t i = 0; i < t.numel; ++i)
      p[size_t(t.offset + i)] = t.kind == model::TensorKind::norm ? float(1.0 + 0.3 * normal(rng))
                                                                  : float(0.08 * normal(rng));
  return p;
}

// What a GPU model gave for a micro-batch.
struct GpuRun {
  std::vector<double> token_losses;
  std::vector<float> grads;
};

// Runs `gpu` (its parameters set) on `batch`: zeroed gradients, forward,
// backward(scale). The loss and every token's loss must be the CPU model's
// (`want`, `want_tokens`) to `tol`.
template <class T>
GpuRun run_against_cpu(Transformer<T>& gpu, const model::Batch& batch, double scale,
                       const model::LossSum& want, std::span<const double> want_tokens,
                       double tol) {
  gpu.zero_grads();
  const model::LossSum got = gpu.forward(batch);
  gpu.backward(scale);
  EXPECT_EQ(got.count, want.count);
  EXPECT_NEAR(got.sum, want.sum, tol * std::abs(want.sum));
  GpuRun run{gpu.token_losses(), gpu.download_grads()};
  int64_t off = 0, first = -1;
  for (size_t i = 0; i < run.token_losses.size(); ++i)
    if (std::abs(run.token_losses[i] - want_tokens[i]) > tol * 10 + tol * want_tokens[i]) {
      off += 1;
      if (first < 0) first = int64_t(i);
    }
  EXPECT_EQ(off, 0) << "tokens whose loss is not the CPU's, the first " << first;
  return run;
}

}  // namespace meshloom::cuda::test
