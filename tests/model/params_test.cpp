// Parameter layout (names, shapes, one gap-free buffer) and the deterministic
// initialization.
#include "model/params.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "model/batch.hpp"
#include "tests/common/test_util.hpp"
#include "tiny_shape.hpp"

namespace meshloom::model {
namespace {

Shape tiny(bool tied) { return tiny_shape(tied); }

TEST(ParamLayout, NamesShapesAndOffsets) {
  for (bool tied : {true, false}) {
    ParamLayout layout(tiny(tied));
    std::vector<std::string> names;
    int64_t at = 0;
    for (const TensorInfo& t : layout.tensors()) {
      names.push_back(t.name);
      EXPECT_EQ(t.offset, at) << t.name;  // contiguous, no gaps
      at += t.numel;
    }
    EXPECT_EQ(at, layout.numel());
    std::vector<std::string> want = {"embed"};
    for (int i = 0; i < 2; ++i) {
      for (const char* n : {"attn_norm", "wq", "wk", "wv", "wo", "mlp_norm", "w1", "w3", "w2"}) {
        want.push_back("layers." + std::to_string(i) + "." + n);
      }
    }
    want.push_back("final_norm");
    if (!tied) want.push_back("lm_head");
    EXPECT_EQ(names, want);
    EXPECT_EQ(layout.find("layers.1.wq").shape, (std::vector<int64_t>{16, 16}));
    EXPECT_EQ(layout.find("layers.1.wk").shape, (std::vector<int64_t>{8, 16}));
    EXPECT_EQ(layout.find("layers.0.wo").shape, (std::vector<int64_t>{16, 16}));
    EXPECT_EQ(layout.find("layers.0.w2").shape, (std::vector<int64_t>{16, 24}));
    EXPECT_EQ(layout.find("layers.0.w3").shape, (std::vector<int64_t>{24, 16}));
    EXPECT_EQ(layout.find("embed").shape, (std::vector<int64_t>{37, 16}));
    const int64_t per_layer = 16 + 16 * 16 + 2 * 8 * 16 + 16 * 16 + 16 + 3 * 24 * 16;
    EXPECT_EQ(layout.numel(), 37 * 16 * (tied ? 1 : 2) + 2 * per_layer + 16);
    EXPECT_EQ(layout.head(), tied ? layout.embed() : layout.find("lm_head").offset);
    // Fused products rely on adjacency.
    EXPECT_EQ(layout.layer(1).wk, layout.layer(1).wq + 16 * 16);
    EXPECT_EQ(layout.layer(1).wv, layout.layer(1).wk + 8 * 16);
    EXPECT_EQ(layout.layer(1).w3, layout.layer(1).w1 + 24 * 16);
    // Weight decay covers everything but the norm gains.
    int64_t decayed = 0;
    for (auto [a, b] : layout.decay_ranges()) decayed += b - a;
    EXPECT_EQ(decayed, layout.numel() - 16 * 5);
  }
}

// A TP rank's layout: the same names in the same order, each tensor its block
// (Megatron's split; vocabulary rows in blocks of ceil(V / tp)); its
// initialization is that block of the whole model's, and the shards of all
// ranks put back together give the whole model exactly.
TEST(ParamLayout, TensorParallelShardsTileTheWholeModel) {
  for (bool tied : {true, false}) {
    const Shape shape = tiny(tied);  // 4 heads, 2 KV heads, FFN 24, V 37
    const ParamLayout whole(shape);
    std::vector<double> full(size_t(whole.numel()));
    init_params<double>(whole, 7, full);
    for (int64_t tp : {1, 2}) {
      std::vector<double> rebuilt(full.size(), -1.0);
      int64_t vocab_rows = 0;
      for (int64_t r = 0; r < tp; ++r) {
        const ParamLayout part(shape, TpShard{tp, r});
        ASSERT_EQ(part.tensors().size(), whole.tensors().size());
        std::vector<double> mine(size_t(part.numel()));
        init_params<double>(part, 7, mine);
        for (size_t i = 0; i < part.tensors().size(); ++i) {
          const TensorInfo& t = part.tensors()[i];
          const TensorInfo& w = whole.tensors()[i];
          ASSERT_EQ(t.name, w.name);
          EXPECT_EQ(t.full_shape, w.shape) << t.name;
          std::vector<double> expect(size_t(t.numel));
          take_shard(t, full.data() + w.offset, expect.data());
          for (int64_t e = 0; e < t.numel; ++e)
            ASSERT_EQ(mine[size_t(t.offset + e)], expect[size_t(e)]) << t.name << " " << e;
          put_shard(t, mine.data() + t.offset, rebuilt.data() + w.offset);
          if (t.name == "embed") vocab_rows += t.shape[0];
          if (t.name == "layers.0.wq") {
            EXPECT_EQ(t.shape[0], shape.q_dim() / tp);
          }
          if (t.name == "layers.0.wo") {
            EXPECT_EQ(t.shape[1], shape.q_dim() / tp);
          }
          if (t.name == "layers.1.w2") {
            EXPECT_EQ(t.shape[1], shape.ffn_dim / tp);
          }
          if (t.kind == TensorKind::norm) {
            EXPECT_EQ(t.shape, w.shape);
          }
        }
      }
      EXPECT_EQ(vocab_rows, shape.vocab);
      EXPECT_EQ(rebuilt, full) << "tp " << tp;
    }
  }
  // Vocabulary blocks of ceil(37 / 4) = 10 rows: 10, 10, 10, 7.
  Shape wide = tiny(true);
  wide.n_heads = 4;
  wide.n_kv_heads = 4;
  EXPECT_EQ(ParamLayout(wide, TpShard{4, 3}).find("embed").shape[0], 7);
  EXPECT_EQ(ParamLayout(wide, TpShard{4, 3}).find("embed").split_begin, 30);
  test::ThrowOnFatal guard;
  EXPECT_THROW(ParamLayout(tiny(true), TpShard{4, 0}), Error);  // 2 KV heads
}

TEST(ParamLayout, RejectsBadShapes) {
  test::ThrowOnFatal guard;
  Shape s = tiny(true);
  s.n_kv_heads = 3;
  EXPECT_THROW(ParamLayout{s}, Error);
  s = tiny(true);
  s.head_dim = 3;
  s.d_model = 12;
  EXPECT_THROW(ParamLayout{s}, Error);
}

TEST(Init, DeterministicAndDistributedAsSpecified) {
  Shape s = tiny(false);
  s.vocab = 4096;
  s.d_model = 64;
  s.head_dim = 16;
  s.n_layers = 8;
  s.ffn_dim = 256;
  ParamLayout layout(s);
  std::vector<float> a(layout.numel()), b(layout.numel()), c(layout.numel());
  std::vector<double> dbl(layout.numel());
  init_params<float>(layout, 7, a, 1);
  init_params<float>(layout, 7, b, 2);
  init_params<float>(layout, 8, c, 1);
  init_params<double>(layout, 7, dbl, 1);
  EXPECT_EQ(a, b);  // thread count does not matter
  EXPECT_NE(a, c);  // the seed does
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], static_cast<float>(dbl[i]));
  auto stats = [&](const std::string& name) {
    const TensorInfo& t = layout.find(name);
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < t.numel; ++i) {
      sum += a[t.offset + i];
      sq += a[t.offset + i] * a[t.offset + i];
    }
    const double mean = sum / t.numel;
    return std::pair(mean, std::sqrt(sq / t.numel - mean * mean));
  };
  auto [m_embed, s_embed] = stats("embed");
  EXPECT_NEAR(m_embed, 0.0, 0.001);
  EXPECT_NEAR(s_embed, 0.02, 0.0005);
  auto [m_wo, s_wo] = stats("layers.3.wo");
  EXPECT_NEAR(s_wo, 0.02 / std::sqrt(16.0), 0.0003);
  auto [m_w2, s_w2] = stats("layers.7.w2");
  EXPECT_NEAR(s_w2, 0.02 / std::sqrt(16.0), 0.0003);
  auto [m_head, s_head] = stats("lm_head");
  EXPECT_NEAR(s_head, 0.02, 0.0005);
  for (const char* gain : {"layers.0.attn_norm", "layers.5.mlp_norm", "final_norm"}) {
    const TensorInfo& t = layout.find(gain);
    for (int64_t i = 0; i < t.numel; ++i) ASSERT_EQ(a[t.offset + i], 1.0f) << gain;
  }
  // Tensors are keyed by their index: two matrices of one shape differ.
  EXPECT_NE(a[layout.layer(0).w1], a[layout.layer(0).w3]);
}

TEST(Init, GoldenValues) {
  // Computed independently from the formula in params.hpp (Python, 64-bit
  // integers); a change here changes every run's initialization.
  EXPECT_EQ(init_hash(0, 0, 0), 18152189527315630385ULL);
  EXPECT_EQ(init_hash(1234, 3, 99), 16524137235457547458ULL);
  EXPECT_DOUBLE_EQ(init_normal(1234, 0, 0), 0.022644397030841094);
  EXPECT_DOUBLE_EQ(init_normal(1234, 5, 7), 0.03208652811520799);
}

TEST(Batch, PackRestartsPositionsAndDropsLastTarget) {
  const std::vector<int32_t> tokens = {5, 6, 7, 8, 9, 10};
  const std::vector<int32_t> lengths = {3, 1, 2};
  Batch b = Batch::pack(tokens, lengths, 10);
  EXPECT_EQ(b.positions, (std::vector<int32_t>{0, 1, 2, 0, 0, 1}));
  EXPECT_EQ(b.samples, (std::vector<int32_t>{10, 10, 10, 11, 12, 12}));
  EXPECT_EQ(b.targets, (std::vector<int32_t>{6, 7, -1, -1, 10, -1}));
  EXPECT_EQ(b.predictions(), 3);
  test::ThrowOnFatal guard;
  EXPECT_THROW(b.validate(10), Error);  // token 10 is outside a vocabulary of 10
  EXPECT_NO_THROW(b.validate(11));
  const std::vector<int32_t> bad = {4, 1};
  EXPECT_THROW(Batch::pack(tokens, bad), Error);
}

}  // namespace
}  // namespace meshloom::model
