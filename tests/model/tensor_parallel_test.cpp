// Tensor parallelism in the CPU model: the ranks of a TP group, one thread
// each, talking through an in-process TpComm, against the whole model in
// double. Their loss equals the whole model's, each rank's gradients are the
// take_shard blocks of the whole model's (norm gains: the whole, the same bits
// on every rank), shards initialize as blocks of the whole model, and tp = 1
// through the new constructor is the single-rank model bit for bit.
#include "model/tensor_parallel.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "model/transformer.hpp"
#include "tests/common/test_util.hpp"

namespace meshloom::model {
namespace {

// The collectives of a TP group of threads: every member publishes its span,
// all wait, each computes the element-wise result over the ranks in rank
// order (so the same bits on every rank, whatever the timing), all wait,
// each writes its result back.
class ThreadGroup {
 public:
  explicit ThreadGroup(int size)
      : size_(size), barrier_(size), data_(static_cast<size_t>(size)), len_(data_.size()) {}

  int size() const { return size_; }

  template <class V>
  void all_reduce(int rank, std::span<V> values, bool max) {
    data_[static_cast<size_t>(rank)] = values.data();
    len_[static_cast<size_t>(rank)] = values.size();
    barrier_.arrive_and_wait();
    std::vector<V> out(values.size());
    for (int r = 0; r < size_; ++r) {
      EXPECT_EQ(len_[static_cast<size_t>(r)], values.size()) << "rank " << r;
    }
    for (size_t i = 0; i < values.size(); ++i) {
      V acc = static_cast<const V*>(data_[0])[i];
      for (int r = 1; r < size_; ++r) {
        const V v = static_cast<const V*>(data_[static_cast<size_t>(r)])[i];
        acc = max ? std::max(acc, v) : acc + v;
      }
      out[i] = acc;
    }
    barrier_.arrive_and_wait();  // everyone has read every input
    std::copy(out.begin(), out.end(), values.begin());
  }

 private:
  int size_;
  std::barrier<> barrier_;
  std::vector<const void*> data_;
  std::vector<size_t> len_;
};

template <class T>
class ThreadComm final : public TpComm<T> {
 public:
  ThreadComm(ThreadGroup& group, int rank) : group_(group), rank_(rank) {}
  void sum_activations(std::span<T> values) override {
    ++calls;
    group_.all_reduce(rank_, values, false);
  }
  void all_reduce_max(std::span<double> values) override { group_.all_reduce(rank_, values, true); }
  void all_reduce_sum(std::span<double> values) override {
    group_.all_reduce(rank_, values, false);
  }
  int64_t calls = 0;

 private:
  ThreadGroup& group_;
  int rank_;
};

// n_heads, n_kv_heads and ffn_dim divisible by 4; the vocabulary by neither 2
// nor 4 (blocks of 19 + 18 and 10 + 10 + 10 + 7 rows).
Shape shape(bool tied) {
  Shape s;
  s.vocab = 37;
  s.d_model = 32;
  s.n_layers = 2;
  s.n_heads = 8;
  s.n_kv_heads = 4;
  s.head_dim = 4;
  s.ffn_dim = 24;
  s.tied = tied;
  return s;
}

// Single-threaded OpenMP per rank; small attention tiles; loss chunks of 7
// tokens, fewer than a micro-batch.
const ModelOptions kOpt{1, 3, 4, 7};
constexpr uint64_t kSeed = 5;

// Several documents, the last token of each predicting nothing, and one more
// target of −1 in the middle.
std::vector<Batch> micro_batches(int64_t vocab) {
  std::mt19937 rng(17);
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(vocab - 1));
  std::vector<Batch> out;
  for (const std::vector<int32_t>& lengths :
       {std::vector<int32_t>{5, 9, 1, 6, 11, 4}, std::vector<int32_t>{7, 12, 3}}) {
    std::vector<int32_t> tokens(
        static_cast<size_t>(std::accumulate(lengths.begin(), lengths.end(), 0)));
    for (int32_t& t : tokens) t = pick(rng);
    out.push_back(Batch::pack(tokens, lengths));
  }
  out[0].targets[3] = -1;
  return out;
}

// Parameters far from the initialization, norm gains away from 1, so every
// term of every gradient matters.
void randomize(std::span<double> params, const ParamLayout& layout) {
  std::mt19937 rng(23);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (const TensorInfo& t : layout.tensors()) {
    for (int64_t e = 0; e < t.numel; ++e) {
      params[static_cast<size_t>(t.offset + e)] =
          t.kind == TensorKind::norm ? 1.0 + 0.3 * normal(rng) : 0.35 * normal(rng);
    }
  }
}

struct Result {
  std::vector<double> loss;  // per micro-batch
  std::vector<int64_t> count;
  std::vector<std::vector<double>> token_loss;  // per micro-batch
  std::vector<double> grads;
  std::vector<double> params;
  int64_t sums = 0;  // sum_activations calls
};

// Two micro-batches accumulated with different scales.
template <class T>
void run_batches(Transformer<T>& m, Result& r) {
  m.zero_grads();
  const std::vector<Batch> batches = micro_batches(m.shape().vocab);
  for (size_t k = 0; k < batches.size(); ++k) {
    const LossSum ls = m.forward(batches[k]);
    r.loss.push_back(ls.sum);
    r.count.push_back(ls.count);
    r.token_loss.emplace_back(m.token_losses().begin(),
                              m.token_losses().begin() + batches[k].size());
    m.backward(k == 0 ? 0.03 : 0.05);
  }
  r.grads.assign(m.grads().begin(), m.grads().end());
}

// The whole model: init_params(kSeed), then (randomized) random parameters.
Result run_whole(const Shape& s, bool randomized) {
  Transformer<double> m(s, kOpt);
  m.init_params(kSeed);
  if (randomized) randomize(m.params(), m.layout());
  Result r;
  r.params.assign(m.params().begin(), m.params().end());
  run_batches(m, r);
  return r;
}

// The tp ranks, one thread each: init_params(kSeed), then (randomized) each
// rank's shard of the whole model's parameters.
std::vector<Result> run_group(const Shape& s, int tp, const std::vector<double>& whole_params,
                              bool randomized) {
  ThreadGroup group(tp);
  std::vector<Result> out(static_cast<size_t>(tp));
  std::vector<std::thread> threads;
  const ParamLayout whole(s);
  for (int rank = 0; rank < tp; ++rank) {
    threads.emplace_back([&, rank] {
      ThreadComm<double> comm(group, rank);
      Transformer<double> m(s, kOpt, TpShard{tp, rank}, &comm);
      m.init_params(kSeed);
      Result& r = out[static_cast<size_t>(rank)];
      r.params.assign(m.params().begin(), m.params().end());
      if (randomized) {
        for (const TensorInfo& t : m.layout().tensors()) {
          take_shard(t, whole_params.data() + whole.find(t.name).offset,
                     m.params().data() + t.offset);
        }
      }
      run_batches(m, r);
      r.sums = comm.calls;
    });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

// max |a − b| ≤ tol · max |b| over a tensor (b not all zero).
void expect_close(std::span<const double> a, std::span<const double> b, double tol,
                  const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  double worst = 0, largest = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::abs(a[i] - b[i]));
    largest = std::max(largest, std::abs(b[i]));
  }
  EXPECT_GT(largest, 0.0) << what;
  EXPECT_LE(worst, tol * largest) << what << ": worst " << worst << " of " << largest;
}

TEST(TensorParallel, ShardsInitializeAsBlocksOfTheWholeModel) {
  for (bool tied : {true, false}) {
    const Shape s = shape(tied);
    Transformer<double> whole(s, kOpt);
    whole.init_params(kSeed);
    for (int tp : {2, 4}) {
      ThreadGroup group(tp);  // never called: construction and init only
      for (int rank = 0; rank < tp; ++rank) {
        ThreadComm<double> comm(group, rank);
        Transformer<double> m(s, kOpt, TpShard{tp, rank}, &comm);
        m.init_params(kSeed);
        for (const TensorInfo& t : m.layout().tensors()) {
          std::vector<double> want(static_cast<size_t>(t.numel));
          take_shard(t, whole.param(t.name).data(), want.data());
          const std::span<double> got = m.param(t.name);
          EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin()))
              << t.name << " tp " << tp << " rank " << rank;
        }
      }
    }
  }
}

TEST(TensorParallel, MatchesTheWholeModel) {
  for (bool tied : {true, false}) {
    for (bool randomized : {false, true}) {
      const Shape s = shape(tied);
      const Result whole = run_whole(s, randomized);
      const ParamLayout whole_layout(s);
      for (int tp : {2, 4}) {
        const std::string what = std::string(tied ? "tied" : "untied") +
                                 (randomized ? ", random params" : ", init") + ", tp " +
                                 std::to_string(tp);
        const std::vector<Result> ranks = run_group(s, tp, whole.params, randomized);
        for (int rank = 0; rank < tp; ++rank) {
          const Result& r = ranks[static_cast<size_t>(rank)];
          const std::string at = what + ", rank " + std::to_string(rank);
          // Embedding, 2 per layer forward, final d(xf), 2 per layer backward.
          EXPECT_EQ(r.sums, 2 * (2 + 4 * s.n_layers)) << at;
          ASSERT_EQ(r.loss.size(), whole.loss.size()) << at;
          for (size_t k = 0; k < whole.loss.size(); ++k) {
            EXPECT_NEAR(r.loss[k], whole.loss[k], 1e-10 * std::abs(whole.loss[k])) << at;
            EXPECT_EQ(r.count[k], whole.count[k]) << at;
            // The loss is the same bits on every rank.
            EXPECT_EQ(r.loss[k], ranks[0].loss[k]) << at;
            expect_close(r.token_loss[k], whole.token_loss[k], 1e-10, at + ", token losses");
          }
          const ParamLayout layout(s, TpShard{tp, rank});
          for (const TensorInfo& t : layout.tensors()) {
            const TensorInfo& w = whole_layout.find(t.name);
            std::vector<double> want(static_cast<size_t>(t.numel));
            take_shard(t, whole.grads.data() + w.offset, want.data());
            const std::span<const double> got(r.grads.data() + t.offset,
                                              static_cast<size_t>(t.numel));
            expect_close(got, want, 1e-9, at + ", " + t.name);
            if (t.kind == TensorKind::norm) {
              // Replicated: the same bits on every rank (no TP reduction needed).
              const double* first =
                  ranks[0].grads.data() + ParamLayout(s, TpShard{tp, 0}).find(t.name).offset;
              EXPECT_TRUE(std::equal(got.begin(), got.end(), first)) << at << ", " << t.name;
            }
          }
        }
      }
    }
  }
}

// tp = 1 through the new constructor (shard {1, 0}, even with a TpComm given)
// is the single-rank model: the same bits of loss, token losses and grads.
template <class T>
void expect_tp1_identical() {
  for (bool tied : {true, false}) {
    const Shape s = shape(tied);
    Transformer<T> plain(s, kOpt);
    ThreadGroup group(1);
    ThreadComm<T> comm(group, 0);
    Transformer<T> one(s, kOpt, TpShard{1, 0}, &comm);
    Result a, b;
    for (Transformer<T>* m : {&plain, &one}) {
      m->init_params(kSeed);
      std::mt19937 rng(3);
      std::normal_distribution<double> normal(0.0, 0.3);
      for (T& x : m->params()) x += static_cast<T>(normal(rng));
      run_batches(*m, m == &plain ? a : b);
    }
    EXPECT_EQ(comm.calls, 0);
    EXPECT_EQ(a.loss, b.loss);
    EXPECT_EQ(a.token_loss, b.token_loss);
    ASSERT_EQ(plain.grads().size(), one.grads().size());
    EXPECT_EQ(0, std::memcmp(plain.grads().data(), one.grads().data(), plain.grads().size_bytes()));
  }
}

TEST(TensorParallel, TpOneIsTheSingleRankModel) {
  expect_tp1_identical<double>();
  expect_tp1_identical<float>();
}

TEST(TensorParallel, NeedsItsCommAboveOneRank) {
  test::ThrowOnFatal guard;
  EXPECT_THROW(Transformer<double>(shape(true), kOpt, TpShard{2, 0}, nullptr), Error);
}

}  // namespace
}  // namespace meshloom::model
