// Tensor parallelism in the CPU model: the ranks of a TP group, one thread
// each, talking through an in-process TpComm, against the whole model in
// double. Their loss equals the whole model's, each rank's gradients are the
// take_shard blocks of the whole model's (norm gains: the whole, the same bits
// on every rank), shards initialize as blocks of the whole model, and tp = 1
// through the new constructor is the single-rank model bit for bit. The same
// with sequence parallelism (micro-batches whose tokens tp does not divide,
// one with fewer tokens than ranks), whose forward is also the same bits as
// plain TP's.
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
#include "tests/model/image_batch.hpp"
#include "tiny_shape.hpp"

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

  // Sequence parallelism's collectives over rows sequence_rows(n, size, rank)
  // of an [n, width] matrix (TpComm::all_gather_rows, reduce_scatter_rows).
  template <class V>
  void all_gather_rows(int rank, std::span<const V> mine, std::span<V> all, int64_t width) {
    const int64_t n = static_cast<int64_t>(all.size()) / width;
    EXPECT_EQ(static_cast<int64_t>(mine.size()), sequence_rows(n, size_, rank).count() * width);
    publish(rank, mine.data(), all.size());
    std::vector<V> out(all.size());
    for (int r = 0; r < size_; ++r) {
      const RowRange rows = sequence_rows(n, size_, r);
      const V* src = static_cast<const V*>(data_[static_cast<size_t>(r)]);
      std::copy(src, src + rows.count() * width, out.begin() + rows.begin * width);
    }
    barrier_.arrive_and_wait();  // everyone has read every input
    std::copy(out.begin(), out.end(), all.begin());
  }

  template <class V>
  void reduce_scatter_rows(int rank, std::span<const V> all, std::span<V> mine, int64_t width) {
    const RowRange rows = sequence_rows(static_cast<int64_t>(all.size()) / width, size_, rank);
    EXPECT_EQ(static_cast<int64_t>(mine.size()), rows.count() * width);
    publish(rank, all.data(), all.size());
    std::vector<V> out(mine.size());
    for (size_t i = 0; i < mine.size(); ++i) {
      const size_t at = static_cast<size_t>(rows.begin * width) + i;
      V acc = static_cast<const V*>(data_[0])[at];
      for (int r = 1; r < size_; ++r)
        acc += static_cast<const V*>(data_[static_cast<size_t>(r)])[at];
      out[i] = acc;
    }
    barrier_.arrive_and_wait();
    std::copy(out.begin(), out.end(), mine.begin());
  }

  template <class V>
  void all_reduce(int rank, std::span<V> values, bool max) {
    publish(rank, values.data(), values.size());
    std::vector<V> out(values.size());
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
  // Shows this rank's input to the others, once all have (the same length).
  void publish(int rank, const void* data, size_t len) {
    data_[static_cast<size_t>(rank)] = data;
    len_[static_cast<size_t>(rank)] = len;
    barrier_.arrive_and_wait();
    for (int r = 0; r < size_; ++r) EXPECT_EQ(len_[static_cast<size_t>(r)], len) << "rank " << r;
  }

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
  void all_gather_rows(std::span<const T> mine, std::span<T> all, int64_t width) override {
    ++gathers;
    group_.all_gather_rows(rank_, mine, all, width);
  }
  void reduce_scatter_rows(std::span<const T> all, std::span<T> mine, int64_t width) override {
    ++scatters;
    group_.reduce_scatter_rows(rank_, all, mine, width);
  }
  int64_t calls = 0;  // sum_activations
  int64_t gathers = 0, scatters = 0;

 private:
  ThreadGroup& group_;
  int rank_;
};

// n_heads, n_kv_heads and ffn_dim divisible by 4; the vocabulary by neither 2
// nor 4 (blocks of 19 + 18 and 10 + 10 + 10 + 7 rows).
Shape shape(bool tied, int64_t patch_dim = 0) {
  Shape s = tiny_shape(tied, patch_dim);  // more heads, so that TP 4 splits them
  s.d_model = 32;
  s.n_heads = 8;
  s.n_kv_heads = 4;
  return s;
}

// Single-threaded OpenMP per rank; small attention tiles; loss chunks of 7
// tokens, fewer than a micro-batch; with and without sequence parallelism.
const ModelOptions kOpt{1, 3, 4, 7};
const ModelOptions kOptSp{1, 3, 4, 7, true};
constexpr uint64_t kSeed = 5;

// Several documents, the last token of each predicting nothing, and one more
// target of −1 in the middle. 36, 22, 13 and 3 tokens: 4 divides only the
// first, 2 the first two, and the last has fewer tokens than 4 ranks.
// With patch_dim > 0, image positions in three of them: the start of a
// sample, and one sample all image.
std::vector<Batch> micro_batches(int64_t vocab, int64_t patch_dim = 0) {
  std::mt19937 rng(17);
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(vocab - 1));
  std::vector<Batch> out;
  for (const std::vector<int32_t>& lengths :
       {std::vector<int32_t>{5, 9, 1, 6, 11, 4}, std::vector<int32_t>{7, 12, 3},
        std::vector<int32_t>{6, 1, 6}, std::vector<int32_t>{3}}) {
    std::vector<int32_t> tokens(
        static_cast<size_t>(std::accumulate(lengths.begin(), lengths.end(), 0)));
    for (int32_t& t : tokens) t = pick(rng);
    out.push_back(Batch::pack(tokens, lengths));
  }
  out[0].targets[3] = -1;
  if (patch_dim > 0) {
    test::add_images(out[0], 0, 3, patch_dim, 1);
    test::add_images(out[0], 15, 6, patch_dim, 2);
    test::add_images(out[1], 7, 4, patch_dim, 3);
    test::add_images(out[2], 7, 3, patch_dim, 4);
  }
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
  int64_t sums = 0;                   // sum_activations calls
  int64_t gathers = 0, scatters = 0;  // all_gather_rows, reduce_scatter_rows calls
};

// The micro-batches accumulated with different scales, every other one
// through forward_backward() (what a trainer runs), the others through
// forward() and backward().
template <class T>
void run_batches(Transformer<T>& m, Result& r) {
  m.zero_grads();
  const std::vector<Batch> batches = micro_batches(m.shape().vocab, m.shape().patch_dim);
  for (size_t k = 0; k < batches.size(); ++k) {
    const double scale = 0.03 + 0.02 * static_cast<double>(k);
    const LossSum ls = k % 2 ? m.forward_backward(batches[k], scale) : m.forward(batches[k]);
    r.loss.push_back(ls.sum);
    r.count.push_back(ls.count);
    r.token_loss.emplace_back(m.token_losses().begin(),
                              m.token_losses().begin() + batches[k].size());
    if (k % 2 == 0) m.backward(scale);
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
                              bool randomized, const ModelOptions& opt = kOpt) {
  ThreadGroup group(tp);
  std::vector<Result> out(static_cast<size_t>(tp));
  std::vector<std::thread> threads;
  const ParamLayout whole(s);
  for (int rank = 0; rank < tp; ++rank) {
    threads.emplace_back([&, rank] {
      ThreadComm<double> comm(group, rank);
      Transformer<double> m(s, opt, TpShard{tp, rank}, &comm);
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
      r.gathers = comm.gathers;
      r.scatters = comm.scatters;
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

// Every rank of the group against the whole model: losses (the same bits on
// every rank), counts, every token's loss, and each rank's gradients the
// blocks of the whole model's; norm gains' the same bits on every rank.
void expect_group_matches_whole(const Shape& s, const Result& whole,
                                const std::vector<Result>& ranks, const std::string& what) {
  const int tp = static_cast<int>(ranks.size());
  const ParamLayout whole_layout(s);
  for (int rank = 0; rank < tp; ++rank) {
    const Result& r = ranks[static_cast<size_t>(rank)];
    const std::string at = what + ", rank " + std::to_string(rank);
    ASSERT_EQ(r.loss.size(), whole.loss.size()) << at;
    for (size_t k = 0; k < whole.loss.size(); ++k) {
      EXPECT_NEAR(r.loss[k], whole.loss[k], 1e-10 * std::abs(whole.loss[k])) << at;
      EXPECT_EQ(r.count[k], whole.count[k]) << at;
      EXPECT_EQ(r.loss[k], ranks[0].loss[k]) << at;
      expect_close(r.token_loss[k], whole.token_loss[k], 1e-10, at + ", token losses");
    }
    const ParamLayout layout(s, TpShard{tp, rank});
    for (const TensorInfo& t : layout.tensors()) {
      const TensorInfo& w = whole_layout.find(t.name);
      std::vector<double> want(static_cast<size_t>(t.numel));
      take_shard(t, whole.grads.data() + w.offset, want.data());
      const std::span<const double> got(r.grads.data() + t.offset, static_cast<size_t>(t.numel));
      expect_close(got, want, 1e-9, at + ", " + t.name);
      if (t.split_dim < 0) {
        // Replicated (norm gains, patch_embed): the same bits on every rank
        // (no TP reduction needed).
        const double* first =
            ranks[0].grads.data() + ParamLayout(s, TpShard{tp, 0}).find(t.name).offset;
        EXPECT_TRUE(std::equal(got.begin(), got.end(), first)) << at << ", " << t.name;
      }
    }
  }
}

// check(shape, the whole model's result, tp, randomized, name) for a tied
// and an untied head, initial and random parameters, tp 2 and 4.
template <class Check>
void for_each_case(Check check) {
  for (bool tied : {true, false}) {
    for (bool randomized : {false, true}) {
      const Shape s = shape(tied);
      const Result whole = run_whole(s, randomized);
      for (int tp : {2, 4}) {
        const std::string name = std::string(tied ? "tied" : "untied") +
                                 (randomized ? ", random params" : ", init") + ", tp " +
                                 std::to_string(tp);
        check(s, whole, tp, randomized, name);
      }
    }
  }
}

TEST(TensorParallel, MatchesTheWholeModel) {
  for_each_case(
      [](const Shape& s, const Result& whole, int tp, bool randomized, const std::string& what) {
        const std::vector<Result> ranks = run_group(s, tp, whole.params, randomized);
        expect_group_matches_whole(s, whole, ranks, what);
        // Per micro-batch: the embedding, 2 per layer forward, final d(xf), 2 per
        // layer backward.
        const int64_t batches = static_cast<int64_t>(whole.loss.size());
        for (const Result& r : ranks) {
          EXPECT_EQ(r.sums, batches * (2 + 4 * s.n_layers)) << what;
          EXPECT_EQ(r.gathers + r.scatters, 0) << what;
        }
      });
}

TEST(TensorParallel, SequenceParallelMatchesTheWholeModel) {
  for_each_case(
      [](const Shape& s, const Result& whole, int tp, bool randomized, const std::string& name) {
        const std::string what = name + ", sequence parallel";
        const std::vector<Result> ranks = run_group(s, tp, whole.params, randomized, kOptSp);
        expect_group_matches_whole(s, whole, ranks, what);
        // Per micro-batch (tensor_parallel.hpp): one sum of the norm gains'
        // gradients; forward 1 + 2L reduce-scatters and 1 + 2L all-gathers,
        // backward 1 + 2L reduce-scatters and 1 + 4L all-gathers.
        const int64_t batches = static_cast<int64_t>(whole.loss.size()), L = s.n_layers;
        for (const Result& r : ranks) {
          EXPECT_EQ(r.sums, batches) << what;
          EXPECT_EQ(r.scatters, batches * (2 + 4 * L)) << what;
          EXPECT_EQ(r.gathers, batches * (2 + 6 * L)) << what;
        }
        // Forward runs the same sums in the same order as plain TP: the same
        // bits of loss.
        const std::vector<Result> plain = run_group(s, tp, whole.params, randomized);
        EXPECT_EQ(ranks[0].loss, plain[0].loss) << what;
        EXPECT_EQ(ranks[0].token_loss, plain[0].token_loss) << what;
      });
}

TEST(TensorParallel, SequenceParallelKeepsOnlyItsRows) {
  // Reserved for 101 tokens, a rank holds m = ceil(101 / tp) rows of the
  // layer inputs, h, xn1, xn2 (d each) and 1/rms (2 per layer), of the final
  // states and their 1/rms, and of the backward scratch dx, dxn; it adds
  // one buffer of all rows and the norm gains' partial gradients.
  const Shape s = shape(true);
  const int64_t n = 101, d = s.d_model, L = s.n_layers;
  for (int tp : {2, 4}) {
    ThreadGroup group(tp);  // never called: reserve() only
    ThreadComm<double> comm(group, 0);
    Transformer<double> plain(s, kOpt, TpShard{tp, 0}, &comm);
    Transformer<double> sp(s, kOptSp, TpShard{tp, 0}, &comm);
    plain.reserve(n);
    sp.reserve(n);
    const int64_t fewer = n - (n + tp - 1) / tp;
    const int64_t saved = fewer * ((L + 1) * d + L * (3 * d + 2) + (d + 1) + 2 * d);
    const int64_t added = n * d + (2 * L + 1) * d;
    EXPECT_EQ(plain.buffer_bytes() - sp.buffer_bytes(),
              static_cast<int64_t>(sizeof(double)) * (saved - added))
        << "tp " << tp;
  }
}

TEST(TensorParallel, SequenceParallelSplitsTokensEvenly) {
  // 10 tokens over 4 ranks: 3, 3, 2, 2; 3 over 4: 1, 1, 1, 0.
  const int64_t begins[] = {0, 3, 6, 8}, ends[] = {3, 6, 8, 10};
  for (int64_t r = 0; r < 4; ++r) {
    EXPECT_EQ(sequence_rows(10, 4, r).begin, begins[r]);
    EXPECT_EQ(sequence_rows(10, 4, r).end, ends[r]);
    EXPECT_EQ(sequence_rows(3, 4, r).count(), r < 3 ? 1 : 0);
  }
  EXPECT_EQ(sequence_rows(3, 4, 3).begin, 3);
  EXPECT_EQ(sequence_rows(7, 1, 0).count(), 7);
}

// tp = 1 through the new constructor (shard {1, 0}, even with a TpComm given
// and sequence parallelism asked for) is the single-rank model: the same bits
// of loss, token losses and grads.
template <class T>
void expect_tp1_identical() {
  for (bool tied : {true, false}) {
    const Shape s = shape(tied);
    Transformer<T> plain(s, kOpt);
    ThreadGroup group(1);
    ThreadComm<T> comm(group, 0);
    Transformer<T> one(s, kOptSp, TpShard{1, 0}, &comm);
    Result a, b;
    for (Transformer<T>* m : {&plain, &one}) {
      m->init_params(kSeed);
      std::mt19937 rng(3);
      std::normal_distribution<double> normal(0.0, 0.3);
      for (T& x : m->params()) x += static_cast<T>(normal(rng));
      run_batches(*m, m == &plain ? a : b);
    }
    EXPECT_EQ(comm.calls + comm.gathers + comm.scatters, 0);
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

// Images: patch_embed replicated, with and without sequence parallelism.
TEST(TensorParallel, ImagesMatchTheWholeModel) {
  for (bool tied : {true, false}) {
    const Shape s = shape(tied, 12);
    const Result whole = run_whole(s, true);
    for (int tp : {2, 4}) {
      for (const ModelOptions& opt : {kOpt, kOptSp}) {
        const std::string what = std::string(tied ? "tied" : "untied") + ", images, tp " +
                                 std::to_string(tp) + (opt.sequence_parallel ? ", sp" : "");
        expect_group_matches_whole(s, whole, run_group(s, tp, whole.params, true, opt), what);
      }
    }
  }
}

}  // namespace
}  // namespace meshloom::model
