// The whole model: analytic gradients against central finite differences in
// double for every parameter tensor; document masking; independence of the
// micro-batch split; a ring-style attention backend; float against double;
// thread-count independence; the evaluation's forward_loss().
#include "model/transformer.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "tests/common/test_util.hpp"
#include "tests/model/image_batch.hpp"
#include "tiny_shape.hpp"

namespace meshloom::model {
namespace {

Shape tiny(bool tied) { return tiny_shape(tied); }

std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int32_t& x : t) x = pick(rng);
  return t;
}

Batch make_batch(const std::vector<int32_t>& lengths, int64_t vocab, uint32_t seed) {
  const int64_t n = std::accumulate(lengths.begin(), lengths.end(), int64_t{0});
  return Batch::pack(random_tokens(n, vocab, seed), lengths);
}

// Parameters far from the initialization's near-uniform attention, with norm
// gains away from 1, so every term of the gradient matters.
template <class T>
void randomize(Transformer<T>& m, uint32_t seed) {
  m.init_params(seed);
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (const TensorInfo& t : m.layout().tensors()) {
    std::span<T> p = m.param(t.name);
    for (T& x : p) {
      x = t.kind == TensorKind::norm ? static_cast<T>(1.0 + 0.3 * normal(rng))
                                     : static_cast<T>(0.35 * normal(rng));
    }
  }
}

void gradient_check(bool tied) {
  const Shape s = tiny(tied);
  // Small tiles: several per document; loss chunks of 7 tokens: 4 of them.
  Transformer<double> m(s, ModelOptions{1, 3, 4, 7});
  randomize(m, 11);
  const Batch b = make_batch({5, 8, 1, 3, 7, 2}, s.vocab, 12);
  const double scale = 1.0 / static_cast<double>(b.predictions());
  m.zero_grads();
  const LossSum ls = m.forward(b);
  EXPECT_EQ(ls.count, 4 + 7 + 0 + 2 + 6 + 1);
  m.backward(scale);
  const std::vector<double> analytic(m.grads().begin(), m.grads().end());
  const double h = 1e-5;
  for (const TensorInfo& t : m.layout().tensors()) {
    std::span<double> p = m.param(t.name);
    double worst = 0, largest = 0;
    for (int64_t i = 0; i < t.numel; ++i) {
      const double keep = p[i];
      p[i] = keep + h;
      const double up = m.forward(b).sum * scale;
      p[i] = keep - h;
      const double down = m.forward(b).sum * scale;
      p[i] = keep;
      const double fd = (up - down) / (2 * h);
      const double a = analytic[t.offset + i];
      worst = std::max(worst, std::abs(a - fd) / (1e-6 + std::abs(fd)));
      largest = std::max(largest, std::abs(fd));
      ASSERT_NEAR(a, fd, 1e-8 + 1e-6 * std::abs(fd)) << t.name << "[" << i << "]";
    }
    EXPECT_GT(largest, 1e-4) << t.name << ": gradient suspiciously small";
  }
}

TEST(Transformer, GradientCheckTied) { gradient_check(true); }
TEST(Transformer, GradientCheckUntied) { gradient_check(false); }

// docs/design.md "The model" written out with plain loops over named tensors,
// sharing no code with the model: −log p per token.
std::vector<double> reference_losses(Transformer<double>& m, const Batch& b) {
  const Shape& s = m.shape();
  const int64_t n = b.size(), d = s.d_model, H = s.n_heads, Hk = s.n_kv_heads, D = s.head_dim;
  const int64_t F = s.ffn_dim, V = s.vocab;
  using Mat = std::vector<std::vector<double>>;
  auto W = [&](const std::string& name) { return m.param(name); };
  auto linear = [&](const Mat& x, std::span<double> w, int64_t out, int64_t in) {
    Mat y(x.size(), std::vector<double>(out, 0.0));
    for (size_t t = 0; t < x.size(); ++t) {
      for (int64_t o = 0; o < out; ++o) {
        for (int64_t i = 0; i < in; ++i) y[t][o] += x[t][i] * w[o * in + i];
      }
    }
    return y;
  };
  auto rmsnorm = [&](const Mat& x, std::span<double> g) {
    Mat y = x;
    for (auto& row : y) {
      double ms = 0;
      for (double v : row) ms += v * v / static_cast<double>(d);
      for (int64_t i = 0; i < d; ++i) row[i] = row[i] / std::sqrt(ms + 1e-5) * g[i];
    }
    return y;
  };
  auto rope = [&](Mat& x, int64_t heads) {
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t h = 0; h < heads; ++h) {
        for (int64_t i = 0; i < D / 2; ++i) {
          const double angle = b.positions[t] * std::pow(s.rope_theta, -2.0 * i / D);
          const double x1 = x[t][h * D + i], x2 = x[t][h * D + i + D / 2];
          x[t][h * D + i] = x1 * std::cos(angle) - x2 * std::sin(angle);
          x[t][h * D + i + D / 2] = x2 * std::cos(angle) + x1 * std::sin(angle);
        }
      }
    }
  };
  Mat x(n);
  for (int64_t t = 0; t < n; ++t) {
    x[t].assign(&W("embed")[b.tokens[t] * d], &W("embed")[b.tokens[t] * d] + d);
  }
  for (int64_t l = 0; l < s.n_layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    const Mat xn = rmsnorm(x, W(p + "attn_norm"));
    Mat q = linear(xn, W(p + "wq"), H * D, d), k = linear(xn, W(p + "wk"), Hk * D, d);
    const Mat v = linear(xn, W(p + "wv"), Hk * D, d);
    rope(q, H);
    rope(k, Hk);
    Mat o(n, std::vector<double>(H * D, 0.0));
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / (H / Hk);
      for (int64_t t = 0; t < n; ++t) {
        std::vector<double> w(n, 0.0);
        double total = 0;
        for (int64_t u = 0; u < n; ++u) {
          if (b.samples[u] != b.samples[t] || b.positions[u] > b.positions[t]) continue;
          double dot = 0;
          for (int64_t c = 0; c < D; ++c) dot += q[t][h * D + c] * k[u][g * D + c];
          w[u] = std::exp(dot / std::sqrt(static_cast<double>(D)));
          total += w[u];
        }
        for (int64_t u = 0; u < n; ++u) {
          for (int64_t c = 0; c < D; ++c) o[t][h * D + c] += w[u] / total * v[u][g * D + c];
        }
      }
    }
    const Mat ao = linear(o, W(p + "wo"), d, H * D);
    Mat hh = x;
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t i = 0; i < d; ++i) hh[t][i] += ao[t][i];
    }
    const Mat xn2 = rmsnorm(hh, W(p + "mlp_norm"));
    const Mat a = linear(xn2, W(p + "w1"), F, d), c3 = linear(xn2, W(p + "w3"), F, d);
    Mat u(n, std::vector<double>(F));
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t j = 0; j < F; ++j) u[t][j] = a[t][j] / (1 + std::exp(-a[t][j])) * c3[t][j];
    }
    const Mat mo = linear(u, W(p + "w2"), d, F);
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t i = 0; i < d; ++i) x[t][i] = hh[t][i] + mo[t][i];
    }
  }
  const Mat logits = linear(rmsnorm(x, W("final_norm")), W(s.tied ? "embed" : "lm_head"), V, d);
  std::vector<double> loss(n, 0.0);
  for (int64_t t = 0; t < n; ++t) {
    if (b.targets[t] < 0) continue;
    double total = 0;
    for (double z : logits[t]) total += std::exp(z);
    loss[t] = std::log(total) - logits[t][b.targets[t]];
  }
  return loss;
}

TEST(Transformer, ForwardMatchesTheWrittenOutDefinition) {
  for (bool tied : {true, false}) {
    Shape s = tiny(tied);
    s.rope_theta = 500.0;  // a non-default base, to check that it is used
    Transformer<double> m(s, ModelOptions{1, 3, 5});
    randomize(m, 41);
    const Batch b = make_batch({6, 1, 9, 4}, s.vocab, 42);
    const LossSum ls = m.forward(b);
    const std::vector<double> want = reference_losses(m, b);
    double sum = 0;
    for (int64_t t = 0; t < b.size(); ++t) {
      EXPECT_NEAR(m.token_losses()[t], want[t], 1e-11) << "token " << t;
      sum += want[t];
    }
    EXPECT_NEAR(ls.sum, sum, 1e-10);
  }
}

TEST(Transformer, InitialLossIsLogVocab) {
  Shape s = tiny(false);
  s.vocab = 97;
  Transformer<float> m(s, ModelOptions{1});
  m.init_params(3);
  const Batch b = make_batch({30, 20}, s.vocab, 4);
  const LossSum ls = m.forward(b);
  EXPECT_EQ(ls.count, 48);
  EXPECT_NEAR(ls.sum / ls.count, std::log(97.0), 0.05);
}

TEST(Transformer, SampleLossIgnoresWhatElseIsPacked) {
  const Shape s = tiny(true);
  Transformer<double> m(s, ModelOptions{1, 4, 4});
  randomize(m, 5);
  const std::vector<int32_t> a = random_tokens(9, s.vocab, 1);
  const std::vector<int32_t> b = random_tokens(6, s.vocab, 2);
  const std::vector<int32_t> c = random_tokens(11, s.vocab, 3);
  const std::vector<int32_t> la = {9};
  const LossSum alone = m.forward(Batch::pack(a, la));
  const std::vector<double> alone_tokens(m.token_losses().begin(), m.token_losses().begin() + 9);
  std::vector<int32_t> packed = b;
  packed.insert(packed.end(), a.begin(), a.end());
  packed.insert(packed.end(), c.begin(), c.end());
  const std::vector<int32_t> lengths = {6, 9, 11};
  const LossSum all = m.forward(Batch::pack(packed, lengths));
  double in_pack = 0;
  for (int i = 0; i < 9; ++i) {
    EXPECT_NEAR(m.token_losses()[6 + i], alone_tokens[i], 1e-12) << i;
    in_pack += m.token_losses()[6 + i];
  }
  EXPECT_NEAR(in_pack, alone.sum, 1e-11);
  // The packed sum is the sum of the three samples' own losses.
  const std::vector<int32_t> lb = {6}, lc = {11};
  const double sb = m.forward(Batch::pack(b, lb)).sum;
  const double sc = m.forward(Batch::pack(c, lc)).sum;
  EXPECT_NEAR(all.sum, alone.sum + sb + sc, 1e-10);
  EXPECT_EQ(all.count, 8 + 5 + 10);
}

TEST(Transformer, GradientsDoNotDependOnTheMicroBatchSplit) {
  const Shape s = tiny(false);
  Transformer<double> m(s, ModelOptions{1, 4, 4});
  randomize(m, 6);
  const std::vector<int32_t> tokens = random_tokens(30, s.vocab, 7);
  const std::vector<int32_t> lengths = {7, 4, 10, 9};
  const Batch whole = Batch::pack(tokens, lengths);
  const double scale = 1.0 / static_cast<double>(whole.predictions());
  m.zero_grads();
  const double loss_whole = m.forward(whole).sum;
  m.backward(scale);
  const std::vector<double> g_whole(m.grads().begin(), m.grads().end());
  // Two micro-batches (samples 0,1 and 2,3), gradients accumulated.
  m.zero_grads();
  const std::vector<int32_t> t1(tokens.begin(), tokens.begin() + 11),
      t2(tokens.begin() + 11, tokens.end());
  const std::vector<int32_t> l1 = {7, 4}, l2 = {10, 9};
  double loss_split = m.forward(Batch::pack(t1, l1)).sum;
  m.backward(scale);
  loss_split += m.forward(Batch::pack(t2, l2)).sum;
  m.backward(scale);
  EXPECT_NEAR(loss_split, loss_whole, 1e-10);
  for (size_t i = 0; i < g_whole.size(); ++i) ASSERT_NEAR(m.grads()[i], g_whole[i], 1e-12) << i;
}

// Attention over the micro-batch computed the way a CP ring would: the tokens
// cut into `ranks` blocks, each query block merged over every K/V block, and
// gradients of every K/V block accumulated from every query block.
template <class T>
class RingSimulation final : public AttentionBackend<T> {
 public:
  explicit RingSimulation(int ranks) : ranks_(ranks) {}
  void forward(int, const AttnDims& d, const QueryBlock<T>& q, const KvBlock<T>& kv,
               const AttnOut<T>& res) override {
    const int64_t H = d.n_heads;
    std::vector<T> po(q.n * res.ld), pl(q.n * H);
    for (int r = 0; r < ranks_; ++r) {
      const auto [qb, qe] = cut(q.n, r);
      for (int s = 0; s < ranks_; ++s) {
        const int src = (r + s) % ranks_;  // ring order: own block first
        const auto [kb, ke] = cut(kv.n, src);
        const QueryBlock<T> qq{q.q + qb * q.ld, q.ld, q.sample + qb, q.pos + qb, qe - qb};
        const KvBlock<T> kk{kv.k + kb * kv.ldk, kv.v + kb * kv.ldv, kv.ldk, kv.ldv,
                            kv.sample + kb,     kv.pos + kb,        ke - kb};
        if (s == 0) {
          attention_block_forward(
              d, qq, kk, AttnOut<T>{res.out + qb * res.ld, res.ld, res.lse + qb * H}, opt_);
        } else {
          attention_block_forward(d, qq, kk, AttnOut<T>{po.data(), res.ld, pl.data()}, opt_);
          attention_merge(d, qe - qb, AttnOut<T>{res.out + qb * res.ld, res.ld, res.lse + qb * H},
                          po.data(), res.ld, pl.data());
        }
      }
    }
  }
  void backward(int, const AttnDims& d, const QueryBlock<T>& q, const KvBlock<T>& kv, const T* out,
                int64_t ldo, const T* lse, const T* dout, int64_t lddo, T* dq, int64_t lddq,
                const KvGrad<T>& g) override {
    const int64_t H = d.n_heads;
    std::vector<T> delta(q.n * H);
    attention_delta(d, q.n, out, ldo, dout, lddo, delta.data());
    for (int r = 0; r < ranks_; ++r) {
      const auto [qb, qe] = cut(q.n, r);
      const QueryBlock<T> qq{q.q + qb * q.ld, q.ld, q.sample + qb, q.pos + qb, qe - qb};
      const QueryGrad<T> qg{dout + qb * lddo,      lddo,           lse + qb * H,
                            delta.data() + qb * H, dq + qb * lddq, lddq};
      for (int s = 0; s < ranks_; ++s) {
        const auto [kb, ke] = cut(kv.n, (r + s) % ranks_);
        const KvBlock<T> kk{kv.k + kb * kv.ldk, kv.v + kb * kv.ldv, kv.ldk, kv.ldv,
                            kv.sample + kb,     kv.pos + kb,        ke - kb};
        attention_block_backward(
            d, qq, kk, qg, KvGrad<T>{g.dk + kb * g.lddk, g.dv + kb * g.lddv, g.lddk, g.lddv}, opt_);
      }
    }
  }

 private:
  std::pair<int64_t, int64_t> cut(int64_t n, int r) const {
    return {n * r / ranks_, n * (r + 1) / ranks_};
  }
  int ranks_;
  AttnOptions opt_{2, 3, 1};
};

// The simulated 3-way ring's loss and gradients against local attention.
void expect_ring_equals_local(Transformer<double>& m, const Batch& b) {
  m.zero_grads();
  const double local = m.forward(b).sum;
  m.backward(0.1);
  const std::vector<double> g_local(m.grads().begin(), m.grads().end());
  RingSimulation<double> ring(3);
  m.zero_grads();
  const double ringed = m.forward(b, &ring).sum;
  m.backward(0.1);
  EXPECT_NEAR(ringed, local, 1e-11);
  for (size_t i = 0; i < g_local.size(); ++i) ASSERT_NEAR(m.grads()[i], g_local[i], 1e-12) << i;
}

TEST(Transformer, RingAttentionBackendEqualsLocal) {
  const Shape s = tiny(true);
  Transformer<double> m(s, ModelOptions{1});
  randomize(m, 8);
  expect_ring_equals_local(m, make_batch({13, 6, 9}, s.vocab, 9));
}

// A ring's blocks cut through image positions and captions alike.
TEST(Transformer, RingAttentionBackendEqualsLocalWithImages) {
  Shape s = tiny(false);
  s.patch_dim = 12;
  Transformer<double> m(s, ModelOptions{1});
  randomize(m, 8);
  Batch b = make_batch({13, 6, 9}, s.vocab, 9);
  test::add_images(b, 0, 7, s.patch_dim, 1);
  test::add_images(b, 19, 4, s.patch_dim, 2);
  expect_ring_equals_local(m, b);
}

TEST(Transformer, FloatAgreesWithDouble) {
  Shape s = tiny(false);
  s.vocab = 97;
  s.d_model = 32;
  s.head_dim = 8;
  s.ffn_dim = 48;
  Transformer<double> md(s, ModelOptions{1, 8, 8});
  Transformer<float> mf(s, ModelOptions{1, 8, 8});
  randomize(md, 21);
  for (size_t i = 0; i < md.params().size(); ++i)
    mf.params()[i] = static_cast<float>(md.params()[i]);
  const Batch b = make_batch({17, 30, 5, 12}, s.vocab, 22);
  const double scale = 1.0 / static_cast<double>(b.predictions());
  md.zero_grads();
  mf.zero_grads();
  const double ld = md.forward(b).sum, lf = mf.forward(b).sum;
  md.backward(scale);
  mf.backward(scale);
  EXPECT_NEAR(lf / ld, 1.0, 1e-5);
  for (const TensorInfo& t : md.layout().tensors()) {
    double diff = 0, norm = 0;
    for (int64_t i = 0; i < t.numel; ++i) {
      const double g = md.grads()[t.offset + i], f = mf.grads()[t.offset + i];
      diff += (g - f) * (g - f);
      norm += g * g;
    }
    EXPECT_LT(std::sqrt(diff / norm), 1e-5) << t.name;
  }
}

TEST(Transformer, ThreadCountDoesNotChangeResults) {
  Shape s = tiny(false);
  s.vocab = 300;
  s.d_model = 64;
  s.head_dim = 16;
  s.ffn_dim = 160;
  Transformer<float> one(s, ModelOptions{1, 16, 32});
  Transformer<float> two(s, ModelOptions{2, 16, 32});
  one.init_params(31);
  two.init_params(31);
  const Batch b = make_batch({100, 157, 43, 212}, s.vocab, 32);
  one.zero_grads();
  two.zero_grads();
  const LossSum l1 = one.forward(b), l2 = two.forward(b);
  one.backward(1e-3);
  two.backward(1e-3);
  EXPECT_EQ(l1.sum, l2.sum);
  double worst = 0;
  for (size_t i = 0; i < one.grads().size(); ++i) {
    worst = std::max(worst, static_cast<double>(std::abs(one.grads()[i] - two.grads()[i])));
  }
  EXPECT_EQ(worst, 0.0);
}

// Evaluation: forward_loss() gives forward_backward()'s loss and per-token
// losses bit for bit (loss chunks of 5 tokens), writes no gradient and
// leaves nothing for backward().
TEST(Transformer, ForwardLossIsTheTrainingLossWithoutGradients) {
  test::ThrowOnFatal guard;
  const Shape s = tiny(false);
  Transformer<float> m(s, ModelOptions{2, 4, 8, 5});
  randomize(m, 41);
  const Batch b = make_batch({9, 4, 13}, s.vocab, 42);
  m.zero_grads();
  const LossSum eval = m.forward_loss(b);
  const std::vector<double> eval_tokens(m.token_losses().begin(), m.token_losses().end());
  for (float g : m.grads()) ASSERT_EQ(g, 0.0f);
  EXPECT_THROW(m.backward(1.0), Error);
  const LossSum train = m.forward_backward(b, 0.1);
  EXPECT_EQ(eval.sum, train.sum);
  EXPECT_EQ(eval.count, train.count);
  EXPECT_EQ(eval_tokens, std::vector<double>(m.token_losses().begin(), m.token_losses().end()));
}

TEST(Transformer, RejectsBadBatches) {
  test::ThrowOnFatal guard;
  Transformer<float> m(tiny(true), ModelOptions{1});
  Batch b = make_batch({4}, 37, 1);
  b.tokens[2] = 37;
  EXPECT_THROW(m.forward(b), Error);
  EXPECT_THROW(m.backward(1.0), Error);  // no forward yet
}

}  // namespace
}  // namespace meshloom::model
