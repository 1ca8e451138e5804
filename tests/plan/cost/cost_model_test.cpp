// The cost model: FLOPs from the model's shape, the ring overlap rule, and
// calibration from measured micro-batches.
#include "plan/cost/cost_model.hpp"

#include <gtest/gtest.h>

#include "plan/cost/model_cost.hpp"
#include "plan/model_shape.hpp"
#include "tests/common/test_util.hpp"
#include "tests/plan/plan_test_util.hpp"

using namespace meshloom;
using namespace meshloom::plan;

TEST(NamedShapes, CountsMatchTheArchitecture) {
  const model::Shape s = model_shape("llama-7b");
  EXPECT_EQ(s.n_layers, 32);
  EXPECT_EQ(s.n_heads, 32);
  EXPECT_EQ(s.n_kv_heads, 8);
  EXPECT_EQ(s.d_model, 4096);
  EXPECT_NEAR(s.parameters() / 1e9, 5.93, 0.02);  // GQA (8 KV heads): less than 6.7B
  // Linear FLOPs per token = 2 x every matrix except the embedding lookup.
  const double matrices =
      s.parameters() - double(s.d_model) * s.vocab - 2.0 * s.d_model * s.n_layers;
  EXPECT_NEAR(linear_flops_per_token(s) / (2 * matrices), 1.0, 1e-9);
  EXPECT_DOUBLE_EQ(attention_flops_per_token2(s), 2.0 * 32 * 4096);
  EXPECT_DOUBLE_EQ(kv_bytes_per_token_layer(s), 2.0 * 8 * 128 * 2);
  EXPECT_EQ(model_shape("7b").name, "llama-7b");
  // Mixtral: 2 of 8 experts per token, so more FLOPs per token than 7B but far fewer than its
  // params.
  const model::Shape m = model_shape("mixtral-8x7b");
  EXPECT_GT(linear_flops_per_token(m), linear_flops_per_token(s));
  EXPECT_LT(linear_flops_per_token(m), m.parameters());
  for (const std::string& name : model_shape_names()) {
    const model::Shape x = model_shape(name);
    EXPECT_EQ(x.n_heads * x.head_dim, x.d_model) << name;  // head_dim is stated, not derived
    EXPECT_FALSE(x.tied) << name;
  }
  try {
    model_shape("llama-7");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'llama-7b'"), std::string::npos) << e.what();
  }
}

TEST(CostModel, AttentionIsQuadraticAndRingsHideCommunication) {
  const CostModel c = plantest::llama7b_cost();
  // Attention (a L^2) overtakes the linear layers (b L) at L = b / a, about 38K
  // tokens for LLaMA-7B; far above it, doubling L quadruples the time.
  EXPECT_NEAR(c.b / c.a, 38000, 1000);
  EXPECT_NEAR(c.whole(1 << 20) / c.whole(1 << 19), 4.0, 0.2);
  EXPECT_NEAR(c.piece(8192, 1), c.whole(8192) + c.g, 1e-12);
  // Compute-bound rings: a k-way split costs 1/k of the whole per member.
  const int64_t L = 1 << 20;
  for (int k : {2, 8, 64}) EXPECT_NEAR(c.piece(L, k) * k / c.whole(L), 1.0, 0.01) << k;
  // With a slow link the ring is communication-bound: (k-1) blocks per layer and pass.
  CostModel slow = c;
  slow.bandwidth = 1e6;
  const double tokens = 1024;
  const double comm =
      slow.passes * slow.layers * (tokens * slow.kv_bytes / slow.bandwidth + slow.latency);
  EXPECT_NEAR(slow.micro_batch(tokens, tokens * tokens * 4 / 4, 4),
              slow.b * tokens + slow.a * tokens * tokens / 4 + 3 * comm, 1e-9);
  // Rings inside a node use the faster link.
  CostModel node = slow;
  node.intra_bandwidth = 1e12;
  EXPECT_LT(node.micro_batch(tokens, tokens * tokens, 4, true),
            slow.micro_batch(tokens, tokens * tokens, 4));
  // Offloading costs time only when the copy outlasts the compute.
  EXPECT_DOUBLE_EQ(c.micro_batch(tokens, tokens * tokens, 1, false, 1.0),
                   c.micro_batch(tokens, tokens * tokens, 1));
  EXPECT_NEAR(c.micro_batch(tokens, tokens * tokens, 1, false, 1e12), 1e12 / c.host_bandwidth,
              1e-9);
}

TEST(Calibrate, RecoversKnownCoefficients) {
  const double a = 3e-9, b = 1.2e-4, g = 0.05;
  Rng rng(7);
  std::vector<CalibrationSample> samples;
  for (int i = 0; i < 400; ++i) {
    CalibrationSample s;
    // micro-batches of 1..8 sequences of 64..16K tokens, timed with 1% noise
    const int n = 1 + int(rng.below(8));
    for (int j = 0; j < n; ++j) {
      const double L = 64 * std::pow(256.0, rng.uniform());
      s.tokens += L;
      s.sum_l2 += L * L;
    }
    s.seconds = (a * s.sum_l2 + b * s.tokens + g) * (1 + 0.01 * (rng.uniform() - 0.5));
    samples.push_back(s);
  }
  const Calibration fit = calibrate(samples);
  EXPECT_NEAR(fit.a / a, 1.0, 0.03);
  EXPECT_NEAR(fit.b / b, 1.0, 0.03);
  EXPECT_NEAR(fit.g / g, 1.0, 0.2);
  EXPECT_GT(fit.r2, 0.999);
  EXPECT_EQ(fit.samples, 400u);
  const CostModel m = calibrated(plantest::llama7b_cost(), fit);
  EXPECT_EQ(m.a, fit.a);
  EXPECT_EQ(m.layers, 32);
}

TEST(Calibrate, CoefficientsStayNonNegative) {
  // Time that only grows with tokens, and falls a little with sum L^2: an
  // unconstrained fit would give a < 0.
  std::vector<CalibrationSample> samples;
  for (int i = 1; i <= 50; ++i) {
    const double tokens = 1000.0 * i;
    const double l2 = 1e6 * (51 - i);
    samples.push_back({tokens, l2, 1e-4 * tokens});
  }
  const Calibration fit = calibrate(samples);
  EXPECT_GE(fit.a, 0);
  EXPECT_GE(fit.b, 0);
  EXPECT_GE(fit.g, 0);
  EXPECT_NEAR(fit.b, 1e-4, 1e-6);
}

TEST(Calibrate, CsvFormatAndErrors) {
  test::TempDir dir;
  const std::string ok = dir.file("ok.csv");
  test::write_file(
      ok, "# measured on one H100\ntokens,sum_l2,seconds\n4096,16777216,0.5\n8192,3e7,1.1\n");
  const auto s = read_calibration_csv(ok);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[1].tokens, 8192);
  EXPECT_EQ(s[1].sum_l2, 3e7);
  auto message = [](const std::string& path) {
    try {
      read_calibration_csv(path);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::string bad_header = dir.file("h.csv");
  test::write_file(bad_header, "tokens,time\n1,2\n");
  EXPECT_NE(message(bad_header).find("h.csv:1: expected the header"), std::string::npos);
  const std::string bad_row = dir.file("r.csv");
  test::write_file(bad_row, "tokens,sum_l2,seconds\n1,2,3\n4,x,6\n");
  EXPECT_NE(message(bad_row).find("r.csv:3:"), std::string::npos) << message(bad_row);
  EXPECT_NE(message(dir.file("missing.csv")).find("cannot read"), std::string::npos);
}

// A TP group of tp GPUs: tp x the FLOPs, plus 4 all-reduces of [tokens, d]
// bf16 per layer over each GPU's link (ring all-reduce: 2 (tp-1)/tp of them).
TEST(CostModel, TensorParallelGroupsPayTheirCollectivesPerToken) {
  const model::Shape shape = model_shape("llama-7b");
  Hardware one;
  one.flops = 400e12;
  const CostModel base = CostModel::from_shape(shape, one);
  EXPECT_EQ(base.tp_seconds_per_token, 0.0);
  for (int tp : {2, 4, 8}) {
    Hardware group = one;
    group.tp = tp;
    group.flops = one.flops * tp;
    group.tp_link_bandwidth = 150e9;
    const CostModel c = CostModel::from_shape(shape, group);
    const double expected = shape.n_layers * 4 * (2.0 * (tp - 1) / tp) * 2 * shape.d_model / 150e9;
    EXPECT_NEAR(c.tp_seconds_per_token, expected, expected * 1e-12) << tp;
    EXPECT_NEAR(c.b, base.b / tp + expected, base.b * 1e-12) << tp;
    EXPECT_NEAR(c.a, base.a / tp, base.a * 1e-12) << tp;
    EXPECT_NE(c.describe().find("tp " + std::to_string(tp)), std::string::npos);
  }
}
