// The GPU embedding: the host grouping of positions by token id (no GPU
// needed), the gather, and the deterministic backward against a plain host
// sum, with repeated ids and an odd width; a vocabulary shard (tensor
// parallelism) looks up and accumulates only its rows.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/device/model/embedding.hpp"
#include "kernels/host/device_buffer.hpp"
#include "tests/kernels/gpu_test.hpp"

using namespace meshloom::cuda;

TEST(EmbeddingGroups, GroupsPositionsByIdInOrder) {
  const std::vector<int32_t> tokens = {5, 2, 5, 9, 2, 5};
  const EmbeddingGroups g = group_tokens(tokens, {0, 10});
  EXPECT_EQ(g.ids, (std::vector<int32_t>{2, 5, 9}));
  EXPECT_EQ(g.offsets, (std::vector<int32_t>{0, 2, 5, 6}));
  EXPECT_EQ(g.order, (std::vector<int32_t>{1, 4, 0, 2, 5, 3}));
  EXPECT_EQ(group_tokens({}, {0, 10}).offsets, (std::vector<int32_t>{0}));
  // Rows [4, 9): token 5 only, as row 1.
  const EmbeddingGroups shard = group_tokens(tokens, {4, 5});
  EXPECT_EQ(shard.ids, (std::vector<int32_t>{1}));
  EXPECT_EQ(shard.offsets, (std::vector<int32_t>{0, 3}));
  EXPECT_EQ(shard.order, (std::vector<int32_t>{0, 2, 5}));
}

TEST(EmbeddingGpu, GatherAndDeterministicBackwardMatchTheHost) {
  ML_REQUIRE_GPU();
  const int64_t V = 1000, d = 97, n = 513;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<float> embed(static_cast<size_t>(V * d)), dx(static_cast<size_t>(n * d));
  for (float& x : embed) x = normal(rng);
  for (float& x : dx) x = normal(rng);
  std::vector<int32_t> tokens(static_cast<size_t>(n));
  for (auto& t : tokens) t = int32_t(rng() % 40) * 25;  // 40 ids, each many times

  DeviceBuffer<float> d_embed(embed), d_x(size_t(n * d)), d_dx(dx);
  DeviceBuffer<int32_t> d_tokens(tokens);
  embedding_forward<float>(d_embed.data(), {0, V}, d_tokens.data(), n, d, d_x.data(), nullptr);
  const std::vector<float> x = d_x.download();
  for (int64_t t = 0; t < n; ++t)
    for (int64_t c = 0; c < d; ++c)
      ASSERT_EQ(x[size_t(t * d + c)], embed[size_t(tokens[size_t(t)] * d + c)]);
  // The shard of rows [250, 500) (its embedding starts at row 250): zero
  // rows for the other tokens.
  const VocabRows upper{250, 250};
  embedding_forward<float>(d_embed.data() + upper.first * d, upper, d_tokens.data(), n, d,
                           d_x.data(), nullptr);
  const std::vector<float> xs = d_x.download();
  for (int64_t t = 0; t < n; ++t) {
    const int64_t tok = tokens[size_t(t)];
    const bool mine = tok >= upper.first && tok < upper.first + upper.rows;
    for (int64_t c = 0; c < d; ++c)
      ASSERT_EQ(xs[size_t(t * d + c)], mine ? embed[size_t(tok * d + c)] : 0.0f) << t;
  }

  const EmbeddingGroups g = group_tokens(tokens, {0, V});
  DeviceBuffer<int32_t> ids(g.ids), offsets(g.offsets), order(g.order);
  std::vector<float> grad(size_t(V * d), 0.5f);  // accumulates into what is there
  std::vector<double> ref(grad.begin(), grad.end());
  for (int64_t t = 0; t < n; ++t)
    for (int64_t c = 0; c < d; ++c) ref[size_t(tokens[size_t(t)] * d + c)] += dx[size_t(t * d + c)];
  std::vector<float> runs[2];
  for (auto& out : runs) {
    DeviceBuffer<float> d_grad(grad);
    embedding_backward<float>(d_dx.data(), ids.data(), offsets.data(), order.data(),
                              int64_t(g.ids.size()), d, d_grad.data(), nullptr);
    out = d_grad.download();
  }
  EXPECT_EQ(runs[0], runs[1]) << "backward is not deterministic";
  for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(runs[0][i], ref[i], 1e-4) << i;
}
