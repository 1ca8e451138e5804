// Block attention: one block equals a naive O(n²) reference, and blocks that
// are merged (forward) or accumulated (backward) over a simulated ring of
// context-parallel ranks — zigzag chunks of one long sequence plus short
// documents — equal attention over all tokens on one rank.
#include "model/attention.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace meshloom::model {
namespace {

// Tokens with their (sample, position) tags and Q, K, V rows.
struct Tokens {
  std::vector<int32_t> sample, pos;
  std::vector<double> q, k, v;  // [n, H·D], [n, Hk·D], [n, Hk·D]
  int64_t n() const { return static_cast<int64_t>(sample.size()); }
};

const AttnDims kDims{4, 2, 8};

void fill_random(Tokens& t, const AttnDims& dims, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  auto fill = [&](std::vector<double>& x, int64_t width) {
    x.resize(static_cast<size_t>(t.n() * width));
    for (double& e : x) e = normal(rng);
  };
  fill(t.q, dims.n_heads * dims.head_dim);
  fill(t.k, dims.n_kv_heads * dims.head_dim);
  fill(t.v, dims.n_kv_heads * dims.head_dim);
}

struct Result {
  std::vector<double> out, lse, dq, dk, dv;
};

// The definition, straight: softmax over visible keys, then its gradients.
Result naive(const AttnDims& dims, const Tokens& t, const std::vector<double>& dout) {
  const int64_t n = t.n(), H = dims.n_heads, D = dims.head_dim, Hk = dims.n_kv_heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  Result r;
  r.out.assign(n * H * D, 0.0);
  r.lse.assign(n * H, -std::numeric_limits<double>::infinity());
  r.dq.assign(n * H * D, 0.0);
  r.dk.assign(n * Hk * D, 0.0);
  r.dv.assign(n * Hk * D, 0.0);
  for (int64_t h = 0; h < H; ++h) {
    const int64_t g = h / dims.group();
    for (int64_t i = 0; i < n; ++i) {
      std::vector<double> s(n, 0.0);
      std::vector<bool> vis(n);
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < n; ++j) {
        vis[j] = t.sample[j] == t.sample[i] && t.pos[j] <= t.pos[i];
        if (!vis[j]) continue;
        for (int64_t c = 0; c < D; ++c)
          s[j] += t.q[(i * H + h) * D + c] * t.k[(j * Hk + g) * D + c];
        s[j] *= scale;
        mx = std::max(mx, s[j]);
      }
      if (mx == -std::numeric_limits<double>::infinity()) continue;
      double sum = 0;
      for (int64_t j = 0; j < n; ++j) sum += vis[j] ? std::exp(s[j] - mx) : 0.0;
      const double lse = mx + std::log(sum);
      r.lse[i * H + h] = lse;
      std::vector<double> p(n, 0.0);
      for (int64_t j = 0; j < n; ++j) {
        if (!vis[j]) continue;
        p[j] = std::exp(s[j] - lse);
        for (int64_t c = 0; c < D; ++c)
          r.out[(i * H + h) * D + c] += p[j] * t.v[(j * Hk + g) * D + c];
      }
      if (dout.empty()) continue;
      const double* dO = &dout[(i * H + h) * D];
      double delta = 0;
      for (int64_t c = 0; c < D; ++c) delta += dO[c] * r.out[(i * H + h) * D + c];
      for (int64_t j = 0; j < n; ++j) {
        if (!vis[j]) continue;
        double dp = 0;
        for (int64_t c = 0; c < D; ++c) {
          dp += dO[c] * t.v[(j * Hk + g) * D + c];
          r.dv[(j * Hk + g) * D + c] += p[j] * dO[c];
        }
        const double ds = p[j] * (dp - delta) * scale;
        for (int64_t c = 0; c < D; ++c) {
          r.dq[(i * H + h) * D + c] += ds * t.k[(j * Hk + g) * D + c];
          r.dk[(j * Hk + g) * D + c] += ds * t.q[(i * H + h) * D + c];
        }
      }
    }
  }
  return r;
}

// Several packed documents of odd lengths, positions from 0.
Tokens packed_docs() {
  Tokens t;
  int32_t id = 0;
  for (int32_t len : {5, 1, 7, 3, 9, 2}) {
    for (int32_t p = 0; p < len; ++p) {
      t.sample.push_back(id);
      t.pos.push_back(p);
    }
    ++id;
  }
  fill_random(t, kDims, 1);
  return t;
}

// A CP group of `ranks`: one sequence of 2·ranks·chunk tokens in zigzag
// chunks (rank r holds chunks r and 2·ranks−1−r), plus a short document of
// each rank's own. Returns every rank's token range in the concatenation.
Tokens zigzag(int ranks, int chunk, std::vector<std::pair<int64_t, int64_t>>* ranges) {
  Tokens t;
  for (int r = 0; r < ranks; ++r) {
    const int64_t begin = t.n();
    for (int c : {r, 2 * ranks - 1 - r}) {
      for (int i = 0; i < chunk; ++i) {
        t.sample.push_back(100);
        t.pos.push_back(c * chunk + i);
      }
    }
    for (int i = 0; i < 3 + r; ++i) {
      t.sample.push_back(r);
      t.pos.push_back(i);
    }
    ranges->emplace_back(begin, t.n());
  }
  fill_random(t, kDims, 2);
  return t;
}

template <class T>
std::vector<T> cast(const std::vector<double>& x) {
  return std::vector<T>(x.begin(), x.end());
}

template <class T>
QueryBlock<T> qblock(const AttnDims& d, const std::vector<T>& q, const Tokens& t, int64_t b,
                     int64_t e) {
  const int64_t ld = d.n_heads * d.head_dim;
  return QueryBlock<T>{q.data() + b * ld, ld, t.sample.data() + b, t.pos.data() + b, e - b};
}

template <class T>
KvBlock<T> kvblock(const AttnDims& d, const std::vector<T>& k, const std::vector<T>& v,
                   const Tokens& t, int64_t b, int64_t e) {
  const int64_t ld = d.n_kv_heads * d.head_dim;
  return KvBlock<T>{k.data() + b * ld,   v.data() + b * ld, ld,   ld,
                    t.sample.data() + b, t.pos.data() + b,  e - b};
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isinf(a[i]) || std::isinf(b[i])) {
      if (a[i] != b[i]) return std::numeric_limits<double>::infinity();
      continue;
    }
    m = std::max(m, std::abs(a[i] - b[i]));
  }
  return m;
}

template <class T>
std::vector<double> widen(const std::vector<T>& x) {
  return std::vector<double>(x.begin(), x.end());
}

// Runs forward and backward with queries cut into `qranges` and keys into
// `kranges` (ring style: merge over key blocks, then accumulate gradients).
template <class T>
Result blockwise(const AttnDims& d, const Tokens& t, const std::vector<double>& dout_d,
                 const std::vector<std::pair<int64_t, int64_t>>& qranges,
                 const std::vector<std::pair<int64_t, int64_t>>& kranges, AttnOptions opt) {
  const int64_t n = t.n(), H = d.n_heads, D = d.head_dim, Hk = d.n_kv_heads;
  const std::vector<T> q = cast<T>(t.q), k = cast<T>(t.k), v = cast<T>(t.v), dout = cast<T>(dout_d);
  std::vector<T> out(n * H * D), lse(n * H), po(n * H * D), plse(n * H);
  std::vector<T> dq(n * H * D, T(0)), dk(n * Hk * D, T(0)), dv(n * Hk * D, T(0)), delta(n * H);
  for (auto [qb, qe] : qranges) {
    bool first = true;
    for (auto [kb, ke] : kranges) {
      const QueryBlock<T> qq = qblock(d, q, t, qb, qe);
      const KvBlock<T> kk = kvblock(d, k, v, t, kb, ke);
      if (first) {
        attention_block_forward(d, qq, kk, AttnOut<T>{&out[qb * H * D], H * D, &lse[qb * H]}, opt);
        first = false;
      } else {
        attention_block_forward(d, qq, kk, AttnOut<T>{&po[qb * H * D], H * D, &plse[qb * H]}, opt);
        attention_merge(d, qe - qb, AttnOut<T>{&out[qb * H * D], H * D, &lse[qb * H]},
                        &po[qb * H * D], H * D, &plse[qb * H], opt.threads);
      }
    }
  }
  attention_delta(d, n, out.data(), H * D, dout.data(), H * D, delta.data(), opt.threads);
  for (auto [qb, qe] : qranges) {
    for (auto [kb, ke] : kranges) {
      const QueryGrad<T> g{&dout[qb * H * D], H * D,           &lse[qb * H],
                           &delta[qb * H],    &dq[qb * H * D], H * D};
      const KvGrad<T> kg{&dk[kb * Hk * D], &dv[kb * Hk * D], Hk * D, Hk * D};
      attention_block_backward(d, qblock(d, q, t, qb, qe), kvblock(d, k, v, t, kb, ke), g, kg, opt);
    }
  }
  return Result{widen(out), widen(lse), widen(dq), widen(dk), widen(dv)};
}

std::vector<double> random_dout(const AttnDims& d, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> x(n * d.n_heads * d.head_dim);
  for (double& e : x) e = normal(rng);
  return x;
}

void expect_close(const Result& got, const Result& want, double tol, const std::string& what) {
  EXPECT_LE(max_abs_diff(got.out, want.out), tol) << what << " out";
  EXPECT_LE(max_abs_diff(got.lse, want.lse), tol) << what << " lse";
  EXPECT_LE(max_abs_diff(got.dq, want.dq), tol) << what << " dq";
  EXPECT_LE(max_abs_diff(got.dk, want.dk), tol) << what << " dk";
  EXPECT_LE(max_abs_diff(got.dv, want.dv), tol) << what << " dv";
}

TEST(Attention, NaiveBackwardMatchesFiniteDifferences) {
  // The reference itself: its gradients of Σ dout⊙out are checked numerically.
  const Tokens t = packed_docs();
  const std::vector<double> dout = random_dout(kDims, t.n(), 3);
  const Result r = naive(kDims, t, dout);
  auto loss = [&](const Tokens& x) {
    const Result f = naive(kDims, x, {});
    double s = 0;
    for (size_t i = 0; i < f.out.size(); ++i) s += f.out[i] * dout[i];
    return s;
  };
  const double h = 1e-6;
  double worst = 0;
  for (auto [field, grad] :
       {std::pair{&Tokens::q, &r.dq}, std::pair{&Tokens::k, &r.dk}, std::pair{&Tokens::v, &r.dv}}) {
    for (size_t i = 0; i < (t.*field).size(); ++i) {
      Tokens p = t, m = t;
      (p.*field)[i] += h;
      (m.*field)[i] -= h;
      worst = std::max(worst, std::abs((loss(p) - loss(m)) / (2 * h) - (*grad)[i]));
    }
  }
  EXPECT_LT(worst, 1e-7);
}

TEST(Attention, OneBlockEqualsNaiveAtAnyTiling) {
  const Tokens t = packed_docs();
  const std::vector<double> dout = random_dout(kDims, t.n(), 4);
  const Result want = naive(kDims, t, dout);
  const std::vector<std::pair<int64_t, int64_t>> all = {{0, t.n()}};
  for (auto [tq, tk] : {std::pair<int64_t, int64_t>{64, 128}, {3, 5}, {1, 1}, {4, 2}}) {
    const std::string what = "tiles " + std::to_string(tq) + "x" + std::to_string(tk);
    expect_close(blockwise<double>(kDims, t, dout, all, all, {tq, tk, 1}), want, 1e-12, what);
    expect_close(blockwise<float>(kDims, t, dout, all, all, {tq, tk, 1}), want, 2e-5,
                 what + " float");
  }
}

TEST(Attention, RingOfZigzagBlocksEqualsFullAttention) {
  std::vector<std::pair<int64_t, int64_t>> ranks;
  const Tokens t = zigzag(3, 4, &ranks);
  const std::vector<double> dout = random_dout(kDims, t.n(), 5);
  const Result want = naive(kDims, t, dout);
  const std::vector<std::pair<int64_t, int64_t>> all = {{0, t.n()}};
  const AttnOptions opt{3, 4, 1};
  // One rank holding everything, then 3 ranks exchanging K/V blocks.
  expect_close(blockwise<double>(kDims, t, dout, all, all, opt), want, 1e-12, "one rank");
  expect_close(blockwise<double>(kDims, t, dout, ranks, ranks, opt), want, 1e-12, "ring of 3");
  expect_close(blockwise<float>(kDims, t, dout, ranks, ranks, opt), want, 2e-5, "ring float");
  // Key blocks in reverse ring order, and uneven query/key cuts.
  std::vector<std::pair<int64_t, int64_t>> rev(ranks.rbegin(), ranks.rend());
  expect_close(blockwise<double>(kDims, t, dout, ranks, rev, opt), want, 1e-12, "reversed");
  const std::vector<std::pair<int64_t, int64_t>> cuts = {{0, 5}, {5, 6}, {6, 20}, {20, t.n()}};
  expect_close(blockwise<double>(kDims, t, dout, cuts, ranks, opt), want, 1e-12, "cuts");
}

TEST(Attention, BlockThatSeesNothingIsNeutral) {
  Tokens t = packed_docs();
  const int64_t n = t.n(), H = kDims.n_heads, D = kDims.head_dim;
  // Queries of the last document against keys of the first: all masked.
  const int64_t last = n - 2;
  std::vector<double> out(2 * H * D, 7.0), lse(2 * H, 7.0);
  attention_block_forward<double>(kDims, qblock(kDims, t.q, t, last, n),
                                  kvblock(kDims, t.k, t.v, t, 0, 5),
                                  AttnOut<double>{out.data(), H * D, lse.data()}, {});
  for (double x : out) EXPECT_EQ(x, 0.0);
  for (double x : lse) EXPECT_EQ(x, -std::numeric_limits<double>::infinity());
  std::vector<double> acc(2 * H * D, 1.5), acc_lse(2 * H, 0.25);
  attention_merge<double>(kDims, 2, AttnOut<double>{acc.data(), H * D, acc_lse.data()}, out.data(),
                          H * D, lse.data());
  for (double x : acc) EXPECT_EQ(x, 1.5);
  for (double x : acc_lse) EXPECT_EQ(x, 0.25);
}

TEST(Attention, ThreadsGiveTheSameResult) {
  std::vector<std::pair<int64_t, int64_t>> ranks;
  Tokens t = zigzag(2, 16, &ranks);
  const std::vector<double> dout = random_dout(kDims, t.n(), 6);
  const std::vector<std::pair<int64_t, int64_t>> all = {{0, t.n()}};
  const Result one = blockwise<float>(kDims, t, dout, all, all, {8, 8, 1});
  // 2 threads: one unit per KV head, bit-identical.
  const Result two = blockwise<float>(kDims, t, dout, all, all, {8, 8, 2});
  EXPECT_EQ(one.out, two.out);
  EXPECT_EQ(one.lse, two.lse);
  EXPECT_EQ(one.dq, two.dq);
  EXPECT_EQ(one.dk, two.dk);
  EXPECT_EQ(one.dv, two.dv);
  // 3 threads over 2 KV heads: key-tile stripes with private dQ buffers.
  expect_close(blockwise<float>(kDims, t, dout, all, all, {8, 8, 3}), one, 1e-5, "3 threads");
}

}  // namespace
}  // namespace meshloom::model
