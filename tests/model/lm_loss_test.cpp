// The fused, chunked LM head and cross-entropy (lm_loss.hpp) against the
// plain computation over the whole [n, V] logits, written out here in double:
// chunk sizes that do and do not divide n, tokens without targets, the
// vocabulary split over 2 and 3 shards that combine their statistics in
// process (what tensor parallelism relies on), finite differences; and the
// whole model with tied and untied heads at several chunk sizes; the
// gradients written in forward when the scale is known (forward_with_grads,
// the model's forward_backward).
#include "model/lm_loss.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <barrier>
#include <cmath>
#include <functional>
#include <random>
#include <thread>
#include <vector>

#include "model/transformer.hpp"
#include "tests/common/test_util.hpp"

namespace meshloom::model {
namespace {

constexpr double kTol = 1e-6;  // relative, per tensor

// A head problem: final states xf [n, d], the head [V, d], targets (−1: none).
struct Problem {
  int64_t n = 0, d = 0, V = 0;
  std::vector<double> xf, head;
  std::vector<int32_t> targets;
};

// Logits of a few units (a peaked softmax) and every `skip_every`-th target −1.
Problem make_problem(int64_t n, int64_t d, int64_t V, uint32_t seed, int skip_every = 4) {
  Problem p{n, d, V, {}, {}, {}};
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(V - 1));
  p.xf.resize(static_cast<size_t>(n * d));
  p.head.resize(static_cast<size_t>(V * d));
  for (double& x : p.xf) x = normal(rng);
  for (double& w : p.head) w = 0.6 * normal(rng);
  for (int64_t i = 0; i < n; ++i) {
    const bool none = skip_every > 0 && i % skip_every == skip_every - 1;
    p.targets.push_back(none ? -1 : pick(rng));
  }
  return p;
}

struct Gradients {
  std::vector<double> token_loss;
  double loss = 0;
  int64_t count = 0;
  std::vector<double> dxf, dhead;
};

// The definition with plain loops: all logits at once, softmax, −log p, and
// scale·(softmax − onehot) times head and times xf.
Gradients plain_loss(const Problem& p, double scale) {
  Gradients g;
  g.token_loss.assign(static_cast<size_t>(p.n), 0.0);
  g.dxf.assign(static_cast<size_t>(p.n * p.d), 0.0);
  g.dhead.assign(static_cast<size_t>(p.V * p.d), 0.0);
  std::vector<double> z(static_cast<size_t>(p.V));
  for (int64_t i = 0; i < p.n; ++i) {
    const int32_t target = p.targets[static_cast<size_t>(i)];
    if (target < 0) continue;
    for (int64_t v = 0; v < p.V; ++v) {
      z[v] = 0;
      for (int64_t c = 0; c < p.d; ++c) z[v] += p.xf[i * p.d + c] * p.head[v * p.d + c];
    }
    const double mx = *std::max_element(z.begin(), z.end());
    double total = 0;
    for (double zv : z) total += std::exp(zv - mx);
    g.token_loss[i] = std::log(total) + mx - z[target];
    g.loss += g.token_loss[i];
    ++g.count;
    for (int64_t v = 0; v < p.V; ++v) {
      const double dz = scale * (std::exp(z[v] - mx) / total - (v == target ? 1.0 : 0.0));
      for (int64_t c = 0; c < p.d; ++c) {
        g.dxf[i * p.d + c] += dz * p.head[v * p.d + c];
        g.dhead[v * p.d + c] += dz * p.xf[i * p.d + c];
      }
    }
  }
  return g;
}

// The fused loss on the whole vocabulary; dhead starts from `dhead_before`
// (backward accumulates into it).
Gradients fused_loss(const Problem& p, int64_t chunk, double scale,
                     const std::vector<double>& dhead_before = {}) {
  LmLoss<double> loss(LmLossOptions{chunk, 2});
  WholeVocab whole;
  Gradients g;
  g.token_loss.assign(static_cast<size_t>(p.n), -1.0);
  const LossSum ls = loss.forward(p.xf.data(), p.n, {p.head.data(), 0, p.V, p.d}, p.targets.data(),
                                  whole, g.token_loss);
  g.loss = ls.sum;
  g.count = ls.count;
  g.dxf.assign(static_cast<size_t>(p.n * p.d), 99.0);  // overwritten
  g.dhead = dhead_before.empty() ? std::vector<double>(static_cast<size_t>(p.V * p.d), 0.0)
                                 : dhead_before;
  loss.backward(scale, g.dxf.data(), g.dhead.data());
  return g;
}

double relative_error(const std::vector<double>& got, const std::vector<double>& want) {
  EXPECT_EQ(got.size(), want.size());
  double worst = 0, largest = 0;
  for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
    worst = std::max(worst, std::abs(got[i] - want[i]));
    largest = std::max(largest, std::abs(want[i]));
  }
  return worst / std::max(largest, 1e-300);
}

void expect_same(const Gradients& got, const Gradients& want, const std::string& what) {
  EXPECT_EQ(got.count, want.count) << what;
  EXPECT_LE(std::abs(got.loss - want.loss), kTol * std::abs(want.loss)) << what;
  EXPECT_LE(relative_error(got.token_loss, want.token_loss), kTol) << what;
  EXPECT_LE(relative_error(got.dxf, want.dxf), kTol) << what << ": d(xf)";
  EXPECT_LE(relative_error(got.dhead, want.dhead), kTol) << what << ": d(head)";
}

TEST(LmLoss, EqualsThePlainLossForEveryChunkSize) {
  const Problem p = make_problem(23, 8, 37, 1);
  const double scale = 0.37;
  const Gradients want = plain_loss(p, scale);
  EXPECT_EQ(want.count, 23 - 5);
  // 1 and 23 divide n; 4, 7 and 22 do not; 64 is larger than n.
  for (int64_t chunk : {1, 4, 7, 22, 23, 64}) {
    expect_same(fused_loss(p, chunk, scale), want, "chunk " + std::to_string(chunk));
  }
}

TEST(LmLoss, TokensWithoutTargetsAddNothing) {
  Problem p = make_problem(10, 6, 29, 2, 0);
  for (int64_t i : {0, 3, 4, 9}) p.targets[static_cast<size_t>(i)] = -1;
  const Gradients want = plain_loss(p, 1.0);
  const Gradients got = fused_loss(p, 3, 1.0);
  expect_same(got, want, "some targets -1");
  for (int64_t i : {0, 3, 4, 9}) {
    EXPECT_EQ(got.token_loss[static_cast<size_t>(i)], 0.0) << i;
    for (int64_t c = 0; c < p.d; ++c) EXPECT_EQ(got.dxf[i * p.d + c], 0.0) << i;
  }
  // No target at all: no loss, no gradient.
  std::fill(p.targets.begin(), p.targets.end(), -1);
  const Gradients none = fused_loss(p, 4, 1.0);
  EXPECT_EQ(none.count, 0);
  EXPECT_EQ(none.loss, 0.0);
  for (double g : none.dxf) EXPECT_EQ(g, 0.0);
  for (double g : none.dhead) EXPECT_EQ(g, 0.0);
}

// The head's gradient adds to what is there: with a tied head that is the
// embedding's gradient buffer.
TEST(LmLoss, BackwardAccumulatesTheHeadGradient) {
  const Problem p = make_problem(9, 5, 17, 3);
  std::vector<double> before(static_cast<size_t>(p.V * p.d));
  for (size_t i = 0; i < before.size(); ++i) before[i] = 0.01 * static_cast<double>(i % 13);
  Gradients want = plain_loss(p, 0.5);
  for (size_t i = 0; i < before.size(); ++i) want.dhead[i] += before[i];
  expect_same(fused_loss(p, 4, 0.5, before), want, "accumulated");
}

// forward_with_grads() gives forward() + backward(scale), its logits in the
// caller's scratch when that is large enough and in a buffer of its own
// when not; d(head) adds to what is there, d(xf) is overwritten.
TEST(LmLoss, GradientsWrittenInForwardEqualForwardThenBackward) {
  const Problem p = make_problem(23, 8, 37, 4);
  const double scale = 0.29;
  std::vector<double> before(static_cast<size_t>(p.V * p.d));
  for (size_t i = 0; i < before.size(); ++i) before[i] = 0.02 * static_cast<double>(i % 7);
  for (int64_t chunk : {4, 23, 64}) {
    const Gradients want = fused_loss(p, chunk, scale, before);
    const int64_t need = std::min<int64_t>(chunk, p.n) * p.V;
    for (int64_t scratch_size : {int64_t{0}, need - 1, need}) {
      LmLoss<double> loss(LmLossOptions{chunk, 2});
      WholeVocab whole;
      Gradients got;
      got.token_loss.assign(static_cast<size_t>(p.n), -1.0);
      got.dxf.assign(static_cast<size_t>(p.n * p.d), 99.0);
      got.dhead = before;
      std::vector<double> scratch(static_cast<size_t>(scratch_size), 5.0);
      const LossGrads<double> out{scale, got.dxf.data(), got.dhead.data(), scratch};
      const LossSum ls = loss.forward_with_grads(p.xf.data(), p.n, {p.head.data(), 0, p.V, p.d},
                                                 p.targets.data(), whole, got.token_loss, out);
      got.loss = ls.sum;
      got.count = ls.count;
      const std::string what =
          "chunk " + std::to_string(chunk) + ", scratch " + std::to_string(scratch_size);
      expect_same(got, want, what);
      if (scratch_size == need) {
        EXPECT_NE(scratch[0], 5.0) << what << ": scratch not used";
      }
      test::ThrowOnFatal guard;
      EXPECT_THROW(loss.backward(scale, got.dxf.data(), got.dhead.data()), Error) << what;
    }
  }
}

// The shards of one tensor-parallel group as threads of this process: each
// all-reduce collects every shard's vector, then every shard combines them
// in shard order (so all shards get the same values, as MPI_Allreduce gives).
class ThreadGroup {
 public:
  explicit ThreadGroup(int size) : slots_(static_cast<size_t>(size)), sync_(size) {}

  class Member final : public VocabReducer {
   public:
    Member(ThreadGroup* group, int rank) : group_(group), rank_(rank) {}
    void all_reduce_max(std::span<double> v) override {
      group_->combine(rank_, v, [](double a, double b) { return std::max(a, b); });
    }
    void all_reduce_sum(std::span<double> v) override {
      group_->combine(rank_, v, [](double a, double b) { return a + b; });
    }

   private:
    ThreadGroup* group_;
    int rank_;
  };

 private:
  void combine(int rank, std::span<double> v, const std::function<double(double, double)>& op) {
    slots_[static_cast<size_t>(rank)].assign(v.begin(), v.end());
    sync_.arrive_and_wait();
    for (size_t i = 0; i < v.size(); ++i) {
      v[i] = slots_[0][i];
      for (size_t r = 1; r < slots_.size(); ++r) v[i] = op(v[i], slots_[r][i]);
    }
    sync_.arrive_and_wait();  // no shard refills its slot before all have read
  }

  std::vector<std::vector<double>> slots_;
  std::barrier<> sync_;
};

// The vocabulary cut into `shards` row ranges of (nearly) equal size, each
// run by its own thread: per-token losses of every shard, the shards' head
// gradients side by side, and their d(xf) summed (what TP all-reduces).
Gradients sharded_loss(const Problem& p, int shards, int64_t chunk, double scale) {
  ThreadGroup group(shards);
  std::vector<Gradients> out(static_cast<size_t>(shards));
  std::vector<LossSum> sums(static_cast<size_t>(shards));
  std::vector<int64_t> first(static_cast<size_t>(shards) + 1);
  for (int r = 0; r <= shards; ++r) first[static_cast<size_t>(r)] = p.V * r / shards;
  std::vector<std::thread> threads;
  for (int r = 0; r < shards; ++r) {
    threads.emplace_back([&, r] {
      const int64_t v0 = first[static_cast<size_t>(r)],
                    rows = first[static_cast<size_t>(r) + 1] - v0;
      ThreadGroup::Member vocab(&group, r);
      LmLoss<double> loss(LmLossOptions{chunk, 1});
      Gradients& g = out[static_cast<size_t>(r)];
      g.token_loss.assign(static_cast<size_t>(p.n), 0.0);
      sums[static_cast<size_t>(r)] =
          loss.forward(p.xf.data(), p.n, {p.head.data() + v0 * p.d, v0, rows, p.d},
                       p.targets.data(), vocab, g.token_loss);
      g.dxf.assign(static_cast<size_t>(p.n * p.d), 0.0);
      g.dhead.assign(static_cast<size_t>(rows * p.d), 0.0);
      loss.backward(scale, g.dxf.data(), g.dhead.data());
    });
  }
  for (std::thread& t : threads) t.join();
  Gradients all;
  all.loss = sums[0].sum;
  all.count = sums[0].count;
  all.token_loss = out[0].token_loss;
  all.dxf.assign(static_cast<size_t>(p.n * p.d), 0.0);
  for (int r = 0; r < shards; ++r) {
    const Gradients& g = out[static_cast<size_t>(r)];
    EXPECT_EQ(sums[static_cast<size_t>(r)].sum, all.loss) << "shard " << r;
    EXPECT_EQ(g.token_loss, all.token_loss) << "shard " << r;
    for (size_t i = 0; i < all.dxf.size(); ++i) all.dxf[i] += g.dxf[i];
    all.dhead.insert(all.dhead.end(), g.dhead.begin(), g.dhead.end());
  }
  return all;
}

TEST(LmLoss, VocabularyShardsCombineToThePlainLoss) {
  const Problem p = make_problem(19, 6, 37, 4);
  const double scale = 1.0 / 15.0;
  const Gradients want = plain_loss(p, scale);
  for (int shards : {2, 3}) {
    for (int64_t chunk : {5, 19, 32}) {
      expect_same(sharded_loss(p, shards, chunk, scale), want,
                  std::to_string(shards) + " shards, chunk " + std::to_string(chunk));
    }
  }
}

// Central differences of the loss sum against backward(1) in double.
TEST(LmLoss, GradientsMatchFiniteDifferences) {
  Problem p = make_problem(10, 4, 11, 5, 3);
  const Gradients g = fused_loss(p, 4, 1.0);
  LmLoss<double> loss(LmLossOptions{4, 1});
  WholeVocab whole;
  std::vector<double> token_loss(static_cast<size_t>(p.n));
  auto loss_sum = [&] {
    return loss
        .forward(p.xf.data(), p.n, {p.head.data(), 0, p.V, p.d}, p.targets.data(), whole,
                 token_loss)
        .sum;
  };
  const double h = 1e-5;
  auto check = [&](std::vector<double>& values, const std::vector<double>& analytic,
                   const char* what) {
    double worst = 0, largest = 0;
    for (size_t i = 0; i < values.size(); ++i) {
      const double keep = values[i];
      values[i] = keep + h;
      const double up = loss_sum();
      values[i] = keep - h;
      const double down = loss_sum();
      values[i] = keep;
      worst = std::max(worst, std::abs((up - down) / (2 * h) - analytic[i]));
      largest = std::max(largest, std::abs(analytic[i]));
    }
    EXPECT_GT(largest, 0.1) << what;
    EXPECT_LE(worst, 1e-7 * std::max(1.0, largest)) << what;
  };
  check(p.xf, g.dxf, "xf");
  check(p.head, g.dhead, "head");
}

TEST(LmLoss, RejectsAChunkOfNoTokens) {
  test::ThrowOnFatal guard;
  EXPECT_THROW(LmLoss<float>(LmLossOptions{0, 1}), Error);
}

// The whole model: loss, per-token losses and every gradient do not depend on
// the loss chunk, tied or untied.
TEST(LmLoss, ModelResultsDoNotDependOnTheChunk) {
  for (bool tied : {true, false}) {
    Shape s;
    s.vocab = 41;
    s.d_model = 8;
    s.n_layers = 1;
    s.n_heads = 2;
    s.n_kv_heads = 1;
    s.head_dim = 4;
    s.ffn_dim = 12;
    s.tied = tied;
    std::mt19937 rng(7);
    std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(s.vocab - 1));
    std::vector<int32_t> tokens(25);
    for (int32_t& t : tokens) t = pick(rng);
    const Batch b = Batch::pack(tokens, std::vector<int32_t>{9, 1, 15});
    auto run = [&](int64_t chunk) {
      ModelOptions opt;
      opt.threads = 1;
      opt.loss_chunk = chunk;
      Transformer<double> m(s, opt);
      m.init_params(3);
      for (double& w : m.param(tied ? "embed" : "lm_head")) w *= 40;  // a peaked softmax
      m.zero_grads();
      Gradients g;
      const LossSum ls = m.forward(b);
      g.loss = ls.sum;
      g.count = ls.count;
      g.token_loss.assign(m.token_losses().begin(), m.token_losses().begin() + b.size());
      m.backward(1.0 / static_cast<double>(ls.count));
      g.dxf.assign(m.grads().begin(), m.grads().end());  // every parameter's gradient
      return g;
    };
    const Gradients whole = run(1024);
    for (int64_t chunk : {1, 6, 24, 25}) {
      expect_same(run(chunk), whole,
                  std::string(tied ? "tied" : "untied") + ", chunk " + std::to_string(chunk));
    }
    // The trainer's path: forward_backward() with the scale up front.
    for (int64_t chunk : {1, 7, 1024}) {
      ModelOptions opt;
      opt.threads = 1;
      opt.loss_chunk = chunk;
      Transformer<double> m(s, opt);
      m.init_params(3);
      for (double& w : m.param(tied ? "embed" : "lm_head")) w *= 40;
      m.zero_grads();
      Gradients g;
      const LossSum ls = m.forward_backward(b, 1.0 / static_cast<double>(whole.count));
      g.loss = ls.sum;
      g.count = ls.count;
      g.token_loss.assign(m.token_losses().begin(), m.token_losses().begin() + b.size());
      g.dxf.assign(m.grads().begin(), m.grads().end());
      expect_same(g, whole,
                  std::string(tied ? "tied" : "untied") + ", forward_backward, chunk " +
                      std::to_string(chunk));
    }
  }
}

}  // namespace
}  // namespace meshloom::model
