// Pipeline stages of the CPU model against the whole model, in double: a
// chain of stages (layers split unevenly, tied and untied heads) passes
// each micro-batch's residual stream forward and its gradient back, parks
// activations between forward and backward as 1F1B does, and must give the
// whole model's losses and, tensor by tensor, its gradients (the tied
// embedding's as the sum of stage 0's and the last stage's). Stages hold
// only their tensors, initialized as the whole model's. With images, stage
// 0 holds patch_embed and embeds the image positions.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "model/transformer.hpp"
#include "tests/common/test_util.hpp"
#include "tests/model/image_batch.hpp"
#include "tiny_shape.hpp"

namespace meshloom::model {
namespace {

Shape shape(bool tied, int64_t patch_dim = 0) {
  Shape s = tiny_shape(tied, patch_dim);
  s.vocab = 41;
  s.n_layers = 5;
  return s;
}

const ModelOptions kOpt{1, 3, 4, 7, false};
constexpr uint64_t kSeed = 11;

// With patch_dim > 0, some positions are images.
std::vector<Batch> micro_batches(int64_t vocab, int64_t patch_dim = 0) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(vocab - 1));
  std::vector<Batch> out;
  for (const std::vector<int32_t>& lengths :
       {std::vector<int32_t>{9, 4, 12}, std::vector<int32_t>{20}, std::vector<int32_t>{3, 5},
        std::vector<int32_t>{1, 7, 2, 6}}) {
    int32_t n = 0;
    for (int32_t l : lengths) n += l;
    std::vector<int32_t> tokens(static_cast<size_t>(n));
    for (int32_t& t : tokens) t = pick(rng);
    out.push_back(Batch::pack(tokens, lengths));
  }
  if (patch_dim > 0) {
    test::add_images(out[0], 0, 3, patch_dim, 1);
    test::add_images(out[0], 13, 4, patch_dim, 2);
    test::add_images(out[1], 5, 5, patch_dim, 3);
  }
  return out;
}

double scale_of(size_t k) { return 0.02 + 0.01 * static_cast<double>(k); }

// Random weights (norm gains near 1) for every tensor, keyed by name so that
// each stage draws the same values as the whole model.
void randomize(Transformer<double>& m) {
  for (const TensorInfo& t : m.layout().tensors()) {
    std::mt19937 rng(static_cast<uint32_t>(t.index + 1));
    std::normal_distribution<double> normal(0.0, 1.0);
    for (double& v : m.param(t.name))
      v = t.kind == TensorKind::norm ? 1.0 + 0.3 * normal(rng) : 0.3 * normal(rng);
  }
}

struct WholeRun {
  std::vector<double> loss;
  Transformer<double> model;
};

void run_whole(WholeRun& w) {
  w.model.zero_grads();
  const std::vector<Batch> batches =
      micro_batches(w.model.shape().vocab, w.model.shape().patch_dim);
  for (size_t k = 0; k < batches.size(); ++k)
    w.loss.push_back(w.model.forward_backward(batches[k], scale_of(k)).sum);
}

// Layers per stage -> the stages' [first, end).
std::vector<StageLayers> stages_of(const std::vector<int>& layers) {
  std::vector<StageLayers> out;
  int64_t first = 0;
  for (int l : layers) {
    out.push_back({first, first + l});
    first += l;
  }
  return out;
}

// Every micro-batch forward through all stages (each non-last stage parks
// its activations), then backward in reverse order: as many parked at once
// as there are micro-batches, more than any 1F1B stage holds.
std::vector<double> run_pipeline(std::vector<Transformer<double>>& stages) {
  const std::vector<Batch> batches =
      micro_batches(stages[0].shape().vocab, stages[0].shape().patch_dim);
  const size_t pp = stages.size(), mbs = batches.size();
  std::vector<std::vector<Transformer<double>::Activations>> parked(
      pp, std::vector<Transformer<double>::Activations>(mbs));
  std::vector<double> loss(mbs);
  std::vector<std::vector<double>> boundary(mbs);  // the last stage's input
  for (auto& m : stages) m.zero_grads();
  for (size_t k = 0; k < mbs; ++k) {
    std::vector<double> x;
    for (size_t s = 0; s + 1 < pp; ++s) {
      stages[s].forward_stage(batches[k], x);
      x.assign(stages[s].output().begin(), stages[s].output().end());
      stages[s].swap_activations(parked[s][k]);
    }
    boundary[k] = x;
  }
  for (size_t k = mbs; k-- > 0;) {
    loss[k] = stages[pp - 1].forward_backward(batches[k], scale_of(k), nullptr, boundary[k]).sum;
    std::vector<double> dx(stages[pp - 1].input_grad().begin(), stages[pp - 1].input_grad().end());
    for (size_t s = pp - 1; s-- > 0;) {
      stages[s].swap_activations(parked[s][k]);
      stages[s].backward_stage(dx);
      if (s > 0) dx.assign(stages[s].input_grad().begin(), stages[s].input_grad().end());
    }
  }
  return loss;
}

TEST(PipelineStage, LayoutsHoldTheirTensorsInitializedAsTheWholeModel) {
  for (bool tied : {true, false}) {
    const Shape s = shape(tied);
    Transformer<double> whole(s, kOpt);
    whole.init_params(kSeed);
    int64_t numel = 0;
    for (const StageLayers& st : stages_of({2, 1, 2})) {
      Transformer<double> m(s, kOpt, {}, nullptr, st);
      m.init_params(kSeed);
      numel += m.layout().numel();
      const bool last = st.end == s.n_layers;
      EXPECT_EQ(m.layout().embed() >= 0, st.first == 0 || (last && tied));
      EXPECT_EQ(m.layout().head() >= 0, last);
      for (const TensorInfo& t : m.layout().tensors()) {
        const std::span<double> got = m.param(t.name), want = whole.param(t.name);
        EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin())) << t.name;
      }
      if (!last) {
        test::ThrowOnFatal guard;
        EXPECT_THROW(m.layout().find("layers." + std::to_string(st.end) + ".wq"), Error);
      }
    }
    test::ThrowOnFatal guard;
    EXPECT_THROW(whole.layout().find("nothing"), Error);
    // Only the tied embedding is held twice.
    EXPECT_EQ(numel, whole.layout().numel() + (tied ? s.vocab * s.d_model : 0));
  }
}

TEST(PipelineStage, StagesGiveTheWholeModelsLossAndGradients) {
  for (const Shape& s : {shape(true), shape(false), shape(true, 12)}) {
    const bool tied = s.tied;
    for (const std::vector<int>& split :
         {std::vector<int>{5}, std::vector<int>{2, 3}, std::vector<int>{1, 3, 1},
          std::vector<int>{1, 1, 1, 2}}) {
      const std::string what = std::string(tied ? "tied" : "untied") +
                               (s.patch_dim > 0 ? ", images, " : ", ") +
                               std::to_string(split.size()) + " stages";
      WholeRun whole{{}, Transformer<double>(s, kOpt)};
      randomize(whole.model);
      run_whole(whole);
      std::vector<Transformer<double>> stages;
      for (const StageLayers& st : stages_of(split)) {
        stages.emplace_back(s, kOpt, TpShard{}, nullptr, st);
        randomize(stages.back());
      }
      const std::vector<double> loss = run_pipeline(stages);
      for (size_t k = 0; k < loss.size(); ++k)
        EXPECT_NEAR(loss[k], whole.loss[k], 1e-12 * std::abs(whole.loss[k])) << what;
      for (const TensorInfo& t : whole.model.layout().tensors()) {
        const std::span<double> want = whole.model.grad(t.name);
        std::vector<double> got(want.size(), 0.0);
        int holders = 0;
        for (auto& m : stages) {
          bool held = false;
          for (const TensorInfo& u : m.layout().tensors()) held = held || u.name == t.name;
          if (!held) continue;
          ++holders;
          const std::span<double> g = m.grad(t.name);
          for (size_t i = 0; i < got.size(); ++i) got[i] += g[i];
        }
        EXPECT_EQ(holders, t.name == "embed" && tied && split.size() > 1 ? 2 : 1) << t.name;
        double worst = 0, largest = 0;
        for (size_t i = 0; i < got.size(); ++i) {
          worst = std::max(worst, std::abs(got[i] - want[i]));
          largest = std::max(largest, std::abs(want[i]));
        }
        EXPECT_GT(largest, 0.0) << what << ", " << t.name;
        EXPECT_LE(worst, 1e-10 * largest) << what << ", " << t.name;
      }
    }
  }
}

TEST(PipelineStage, WrongInputsAreRefused) {
  test::ThrowOnFatal guard;
  const Shape s = shape(true);
  Transformer<double> middle(s, kOpt, {}, nullptr, StageLayers{2, 4});
  const Batch b = micro_batches(s.vocab)[0];
  EXPECT_THROW(middle.forward_stage(b, std::vector<double>(3)), Error);
  EXPECT_THROW(middle.forward_backward(b, 1.0), Error);  // not the last stage
  EXPECT_THROW(middle.backward_stage(std::vector<double>(3)), Error);
  EXPECT_THROW(Transformer<double>(s, kOpt, {}, nullptr, StageLayers{3, 9}), Error);
}

}  // namespace
}  // namespace meshloom::model
