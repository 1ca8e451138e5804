// Images in the CPU model (Fuyu-style patch_embed): the layout with and
// without it, gradients of every tensor against finite differences with a
// batch that mixes image positions and text, a text-only batch computing
// the text-only model's bits, the micro-batch split, and what is refused.
// Tensor-parallel ranks with images: tensor_parallel_test.cpp; pipeline
// stages: pipeline_stage_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "model/transformer.hpp"
#include "tests/common/test_util.hpp"
#include "tests/model/image_batch.hpp"
#include "tiny_shape.hpp"

namespace meshloom::model {
namespace {

constexpr int64_t kPatch = 12;  // a 2×2 RGB patch

Shape tiny(bool tied, int64_t patch_dim) { return tiny_shape(tied, patch_dim); }

Batch text_batch(const std::vector<int32_t>& lengths, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> pick(0, 36);
  std::vector<int32_t> tokens(size_t(std::accumulate(lengths.begin(), lengths.end(), 0)));
  for (int32_t& t : tokens) t = pick(rng);
  return Batch::pack(tokens, lengths);
}

// Samples 0 and 2 are an image then a caption; sample 1 is text only.
Batch mixed_batch() {
  Batch b = text_batch({9, 5, 7}, 12);
  test::add_images(b, 0, 4, kPatch, 1);   // sample 0: 4 patches, caption of 5
  test::add_images(b, 14, 3, kPatch, 2);  // sample 2: 3 patches, caption of 4
  return b;
}

void randomize(Transformer<double>& m, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (const TensorInfo& t : m.layout().tensors()) {
    for (double& x : m.param(t.name))
      x = t.kind == TensorKind::norm ? 1.0 + 0.3 * normal(rng) : 0.35 * normal(rng);
  }
}

TEST(PatchEmbed, ComesLastAndLeavesTheOtherTensorsAsTheyWere) {
  const ParamLayout text(tiny(true, 0)), images(tiny(true, kPatch));
  ASSERT_EQ(images.tensors().size(), text.tensors().size() + 1);
  for (size_t i = 0; i < text.tensors().size(); ++i) {
    EXPECT_EQ(images.tensors()[i].name, text.tensors()[i].name);
    EXPECT_EQ(images.tensors()[i].offset, text.tensors()[i].offset);
    EXPECT_EQ(images.tensors()[i].index, text.tensors()[i].index);
  }
  const TensorInfo& p = images.tensors().back();
  EXPECT_EQ(p.name, "patch_embed");
  EXPECT_EQ(p.shape, (std::vector<int64_t>{16, kPatch}));
  EXPECT_EQ(p.offset, text.numel());
  EXPECT_EQ(images.patch_embed(), text.numel());
  EXPECT_EQ(text.patch_embed(), -1);
  EXPECT_EQ(images.decay_ranges().back().second, images.numel());  // decayed like a matrix

  std::vector<float> a(size_t(text.numel())), b(size_t(images.numel()));
  init_params<float>(text, 5, a);
  init_params<float>(images, 5, b);
  EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin()));
  double ss = 0;
  for (int64_t e = 0; e < p.numel; ++e)
    ss += double(b[size_t(p.offset + e)]) * b[size_t(p.offset + e)];
  EXPECT_NEAR(std::sqrt(ss / double(p.numel)), 0.02, 0.006);  // init_std
}

TEST(PatchEmbed, StageZeroHoldsIt) {
  const Shape s = tiny(true, kPatch);
  EXPECT_GE(ParamLayout(s, {}, StageLayers{0, 1}).patch_embed(), 0);
  EXPECT_EQ(ParamLayout(s, {}, StageLayers{1, 2}).patch_embed(), -1);
}

void gradient_check(bool tied) {
  Transformer<double> m(tiny(tied, kPatch), ModelOptions{1, 3, 4, 7});
  randomize(m, 11);
  const Batch b = mixed_batch();
  EXPECT_EQ(b.images(), 7);
  const double scale = 1.0 / static_cast<double>(b.predictions());
  m.zero_grads();
  const LossSum ls = m.forward(b);
  EXPECT_EQ(ls.count, 4 + 4 + 3);  // captions of 5 and 4, text of 5
  m.backward(scale);
  const std::vector<double> analytic(m.grads().begin(), m.grads().end());
  const double h = 1e-5;
  for (const TensorInfo& t : m.layout().tensors()) {
    std::span<double> p = m.param(t.name);
    double largest = 0;
    for (int64_t i = 0; i < t.numel; ++i) {
      const double keep = p[size_t(i)];
      p[size_t(i)] = keep + h;
      const double up = m.forward(b).sum * scale;
      p[size_t(i)] = keep - h;
      const double down = m.forward(b).sum * scale;
      p[size_t(i)] = keep;
      const double fd = (up - down) / (2 * h);
      largest = std::max(largest, std::abs(fd));
      ASSERT_NEAR(analytic[size_t(t.offset + i)], fd, 1e-8 + 1e-6 * std::abs(fd))
          << t.name << "[" << i << "]";
    }
    EXPECT_GT(largest, 1e-4) << t.name << ": gradient suspiciously small";
  }
}

TEST(PatchEmbed, GradientCheckMixedBatchTied) { gradient_check(true); }
TEST(PatchEmbed, GradientCheckMixedBatchUntied) { gradient_check(false); }

// An image position's input is exactly patch_embed · patch: the same model
// with that row written into the embedding and the position as that token
// computes the same loss.
TEST(PatchEmbed, ImagePositionIsPatchEmbedTimesPatch) {
  const Shape s = tiny(false, kPatch);
  Transformer<double> m(s, ModelOptions{1});
  randomize(m, 3);
  Batch b = text_batch({6}, 4);
  test::add_images(b, 2, 1, kPatch, 9);
  const double with_image = m.forward(b).sum;
  int32_t unused = 0;  // a token the batch does not hold: its row becomes the image's
  while (std::find(b.tokens.begin(), b.tokens.end(), unused) != b.tokens.end()) ++unused;
  const std::span<double> w = m.param("patch_embed"), embed = m.param("embed");
  for (int64_t c = 0; c < s.d_model; ++c) {
    double x = 0;
    for (int64_t j = 0; j < kPatch; ++j)
      x += w[size_t(c * kPatch + j)] * double(b.patches[size_t(j)]);
    embed[size_t(unused * s.d_model + c)] = x;
  }
  b.tokens[2] = unused;
  b.patches.clear();
  EXPECT_NEAR(m.forward(b).sum, with_image, 1e-12 * std::abs(with_image));
}

// A text-only batch: the same loss and gradient bits as the model without
// patch_embed (threads on), and a zero gradient for patch_embed.
TEST(PatchEmbed, TextOnlyBatchComputesTheTextModelsBits) {
  for (bool tied : {true, false}) {
    Transformer<float> text(tiny(tied, 0), ModelOptions{3}),
        images(tiny(tied, kPatch), ModelOptions{3});
    text.init_params(7);
    images.init_params(7);
    const Batch b = text_batch({8, 13, 4}, 6);
    text.zero_grads();
    images.zero_grads();
    const double a = text.forward_backward(b, 0.1).sum;
    const double c = images.forward_backward(b, 0.1).sum;
    EXPECT_EQ(a, c);
    const std::span<const float> ga = text.grads(), gc = images.grads();
    EXPECT_TRUE(std::equal(ga.begin(), ga.end(), gc.begin()));
    for (float g : images.grad("patch_embed")) ASSERT_EQ(g, 0.0f);
  }
}

// Two micro-batches (each its own patches) accumulate the whole batch's
// gradients.
TEST(PatchEmbed, GradientsDoNotDependOnTheMicroBatchSplit) {
  Transformer<double> m(tiny(true, kPatch), ModelOptions{2});
  randomize(m, 6);
  const Batch whole = mixed_batch();
  const double scale = 1.0 / static_cast<double>(whole.predictions());
  m.zero_grads();
  const double loss_whole = m.forward_backward(whole, scale).sum;
  const std::vector<double> g_whole(m.grads().begin(), m.grads().end());
  // Samples 0 | 1, 2: the first 9 positions, with the first 4 patches.
  Batch first, second;
  for (Batch* part : {&first, &second}) {
    const bool one = part == &first;
    const auto cut = [&](const auto& v) {
      using V = std::decay_t<decltype(v)>;
      return one ? V(v.begin(), v.begin() + 9) : V(v.begin() + 9, v.end());
    };
    part->tokens = cut(whole.tokens);
    part->targets = cut(whole.targets);
    part->positions = cut(whole.positions);
    part->samples = cut(whole.samples);
    part->patches =
        one ? std::vector<float>(whole.patches.begin(), whole.patches.begin() + 4 * kPatch)
            : std::vector<float>(whole.patches.begin() + 4 * kPatch, whole.patches.end());
  }
  m.zero_grads();
  const double loss_split =
      m.forward_backward(first, scale).sum + m.forward_backward(second, scale).sum;
  EXPECT_NEAR(loss_split, loss_whole, 1e-10);
  for (size_t i = 0; i < g_whole.size(); ++i) ASSERT_NEAR(m.grads()[i], g_whole[i], 1e-12) << i;
}

TEST(PatchEmbed, RefusesInconsistentBatches) {
  test::ThrowOnFatal guard;
  Transformer<float> text(tiny(true, 0), ModelOptions{1}),
      images(tiny(true, kPatch), ModelOptions{1});
  const Batch good = mixed_batch();
  EXPECT_THROW(text.forward(good), Error);  // image positions without patch_embed
  Batch b = good;
  b.targets[1] = 3;  // an image position with a target
  EXPECT_THROW(images.forward(b), Error);
  b = good;
  b.patches.pop_back();
  EXPECT_THROW(images.forward(b), Error);
  b = text_batch({5}, 1);
  b.patches.assign(kPatch, 0.0f);  // patches with no image position
  EXPECT_THROW(images.forward(b), Error);
  Shape bad = tiny(true, -1);
  EXPECT_THROW(bad.validate(), Error);
}

}  // namespace
}  // namespace meshloom::model
