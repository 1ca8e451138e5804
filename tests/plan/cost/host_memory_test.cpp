// The CPU backend's host-memory estimate (plan/cost/host_memory.hpp): its terms
// against the buffers a real model::Transformer allocates, at tp 1, 2 and 4,
// tied and untied, below and above the loss chunk, with and without sequence
// parallelism; the start-up floor worked by hand; a TP rank's shard.
#include "plan/cost/host_memory.hpp"

#include <gtest/gtest.h>

#include <random>
#include <span>
#include <vector>

#include "model/transformer.hpp"
#include "plan/model_shape.hpp"

using namespace meshloom;
using namespace meshloom::plan;

namespace {

// A TP group of one that pretends to be `size`: the sums do nothing, which
// leaves the values wrong but every buffer the size a real rank's is.
class SoloGroup final : public model::TpComm<float> {
 public:
  void sum_activations(std::span<float>) override {}
  void all_reduce_max(std::span<double>) override {}
  void all_reduce_sum(std::span<double>) override {}
  void all_gather_rows(std::span<const float>, std::span<float>, int64_t) override {}
  void reduce_scatter_rows(std::span<const float>, std::span<float>, int64_t) override {}
};

config::Config small_config(bool tied) {
  config::Config c;
  c.model.vocab_size = 1001;  // splits unevenly
  c.model.d_model = 64;
  c.model.n_layers = 2;
  c.model.n_heads = 8;
  c.model.n_kv_heads = 4;
  c.model.ffn_dim = 96;
  c.model.tied_embeddings = tied;
  c.model.loss_chunk = 128;
  return c;
}

}  // namespace

// Rank 0 of a TP group (the largest vocabulary block) runs one micro-batch
// with the trainer's forward_backward; every buffer it then holds is in the
// estimate (weights, gradients, activations, workspace, logits; the moments
// live in the optimizer) and the loss's per-token statistics.
TEST(HostMemory, TermsAreWhatTheModelAllocates) {
  for (bool tied : {true, false}) {
    for (int tp : {1, 2, 4}) {
      for (int64_t n : {int64_t{41}, int64_t{300}}) {
        for (bool sp : {false, true}) {
          config::Config c = small_config(tied);
          SoloGroup group;
          model::ModelOptions opt;
          opt.threads = 1;
          opt.loss_chunk = c.model.loss_chunk;
          opt.sequence_parallel = sp;
          model::Transformer<float> m(model::Shape::from_config(c.model), opt, {tp, 0},
                                      tp > 1 ? &group : nullptr);
          m.init_params(1);
          std::mt19937 rng(5);
          std::uniform_int_distribution<int32_t> pick(0, int32_t(c.model.vocab_size - 1));
          std::vector<int32_t> tokens(static_cast<size_t>(n));
          for (int32_t& t : tokens) t = pick(rng);
          m.forward_backward(model::Batch::pack(tokens, std::vector<int32_t>{int32_t(n)}), 1e-3);

          HostMemoryInput in;
          in.shape = shape_from_config(c);
          in.tokens = n;
          in.tp = tp;
          in.loss_chunk = c.model.loss_chunk;
          in.sequence_parallel = sp;
          const HostMemory est = host_memory(in);
          const int64_t modelled = est.total() - est.moments;
          const int64_t stats = 3 * std::min<int64_t>(n, in.loss_chunk) * 8;  // max, sums (fp64)
          const std::string what = std::string(tied ? "tied" : "untied") + ", tp " +
                                   std::to_string(tp) + ", n " + std::to_string(n) +
                                   (sp ? ", sequence parallel" : "");
          EXPECT_EQ(est.weights, int64_t(m.params().size() * sizeof(float))) << what;
          EXPECT_EQ(m.buffer_bytes(), modelled + stats) << what;
        }
      }
    }
  }
}

// A pipeline stage (first, middle, last; tied and untied; tp 1 and 2) holds
// what the estimate of that stage says, with no activations parked.
TEST(HostMemory, StagesHoldTheirLayersAndTheirEnds) {
  for (bool tied : {true, false}) {
    for (int tp : {1, 2}) {
      for (const model::StageLayers st :
           {model::StageLayers{0, 1}, model::StageLayers{1, 3}, model::StageLayers{3, 4}}) {
        config::Config c = small_config(tied);
        c.model.n_layers = 4;
        const int64_t n = 300;
        SoloGroup group;
        model::ModelOptions opt;
        opt.threads = 1;
        opt.loss_chunk = c.model.loss_chunk;
        const model::Shape shape = model::Shape::from_config(c.model);
        model::Transformer<float> m(shape, opt, {tp, 0}, tp > 1 ? &group : nullptr, st);
        m.init_params(1);
        std::vector<int32_t> tokens(static_cast<size_t>(n), 7);
        const model::Batch b = model::Batch::pack(tokens, std::vector<int32_t>{int32_t(n)});
        const std::vector<float> rows(static_cast<size_t>(n * shape.d_model), 0.01f);
        const bool first = st.first == 0, last = st.end == shape.n_layers;
        if (last) {
          m.forward_backward(b, 1e-3, nullptr, first ? std::span<const float>{} : rows);
        } else {
          m.forward_stage(b, rows);
          m.backward_stage(rows);
        }
        HostMemoryInput in;
        in.shape = shape_from_config(c);
        in.tokens = n;
        in.tp = tp;
        in.loss_chunk = c.model.loss_chunk;
        in.stage_layers = st.end - st.first;
        in.first_stage = first;
        in.last_stage = last;
        const HostMemory est = host_memory(in);
        const int64_t stats = last ? 3 * std::min<int64_t>(n, in.loss_chunk) * 8 : 0;
        const std::string what = std::string(tied ? "tied" : "untied") + ", tp " +
                                 std::to_string(tp) + ", layers " + std::to_string(st.first) + "-" +
                                 std::to_string(st.end);
        EXPECT_EQ(est.weights, int64_t(m.params().size() * sizeof(float))) << what;
        EXPECT_EQ(m.buffer_bytes(), est.total() - est.moments + stats) << what;
        // Parked micro-batches add their activations, RoPE angles and ids.
        in.parked = 2;
        EXPECT_GT(host_memory(in).activations, 3 * est.activations) << what;
      }
    }
  }
}

TEST(HostMemory, FloorIsWeightsGradientsMomentsAndTheLossChunk) {
  config::Config c;
  c.model.vocab_size = 1000;
  c.model.d_model = 64;
  c.model.n_layers = 2;
  c.model.n_heads = 4;
  c.model.n_kv_heads = 4;
  c.model.ffn_dim = 128;
  c.data.tokens_per_step = 4096;
  const int64_t P = plan::shape_from_config(c).numel();
  // Tied embedding 1000x64, per layer 4 64x64 projections, 3 64x128 MLP
  // matrices and 2 norms, and the final norm.
  EXPECT_EQ(P, 1000 * 64 + 2 * (4 * 64 * 64 + 3 * 64 * 128 + 2 * 64) + 64);
  // The fused loss: the logits of one chunk, here the whole micro-batch of
  // C = 400 tokens (the default chunk is 512).
  c.plan.capacity = 400;
  EXPECT_EQ(plan::host_memory_floor(c, 4), 16 * P + 4 * 400 * 1000);
  c.optim.zero1 = true;
  EXPECT_EQ(plan::host_memory_floor(c, 4), 8 * P + 8 * ((P + 3) / 4) + 4 * 400 * 1000);
  c.data.tokens_per_step = 100;  // micro-batches never exceed the step
  EXPECT_EQ(plan::host_memory_floor(c, 4), 8 * P + 8 * ((P + 3) / 4) + 4 * 100 * 1000);
  c.data.tokens_per_step = 4096;
  c.model.loss_chunk = 128;  // chunks smaller than the micro-batch
  EXPECT_EQ(plan::host_logit_tokens(c), 128);
  EXPECT_EQ(plan::host_memory_floor(c, 4), 8 * P + 8 * ((P + 3) / 4) + 4 * 128 * 1000);
}

// A TP rank holds 1/tp of the weights, gradients and moments (the norm gains
// whole) and a ceil(V / tp) block of the vocabulary for the loss buffers.
TEST(HostMemory, TensorParallelRanksHoldTheirShard) {
  config::Config c;
  c.model.vocab_size = 50257;
  c.model.d_model = 512;
  c.model.n_layers = 8;
  c.model.n_heads = 8;
  c.model.n_kv_heads = 8;
  c.model.ffn_dim = 1376;
  const int64_t one = host_memory_floor(c, 4);
  c.parallel.tp = 2;
  const int64_t two = host_memory_floor(c, 4);
  const model::Shape shape = shape_from_config(c);
  const int64_t norms = shape.d_model * (2 * shape.n_layers + 1);
  // weights + grads + 2 moments = 4 fp32 copies; the loss buffers halve too.
  const int64_t expected_saving = 4 * 4 * (shape.numel() - norms) / 2;
  EXPECT_NEAR(double(one - two), double(expected_saving) + double(one - 16 * shape.numel()) / 2,
              double(one) * 1e-3);
  EXPECT_LT(two, one * 0.51 + 16 * norms);
}
