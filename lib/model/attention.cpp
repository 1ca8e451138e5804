#include "model/attention.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "base/check.hpp"
#include "model/blas.hpp"
#include "model/math.hpp"

namespace meshloom::model {
namespace {

// A run of consecutive rows with the ranges of their sample ids and positions.
struct Tile {
  int64_t begin = 0, end = 0;
  int32_t smin = 0, smax = 0, pmin = 0, pmax = 0;
};

std::vector<Tile> make_tiles(const int32_t* sample, const int32_t* pos, int64_t n, int64_t size) {
  std::vector<Tile> tiles;
  for (int64_t b = 0; b < n; b += size) {
    Tile t;
    t.begin = b;
    t.end = std::min(n, b + size);
    t.smin = t.smax = sample[b];
    t.pmin = t.pmax = pos[b];
    for (int64_t i = b + 1; i < t.end; ++i) {
      t.smin = std::min(t.smin, sample[i]);
      t.smax = std::max(t.smax, sample[i]);
      t.pmin = std::min(t.pmin, pos[i]);
      t.pmax = std::max(t.pmax, pos[i]);
    }
    tiles.push_back(t);
  }
  return tiles;
}

enum class Vis { none, full, partial };

// Conservative from the ranges: `none` and `full` are exact claims, anything
// unsure is `partial` and gets the per-element mask.
Vis classify(const Tile& q, const Tile& k) {
  if (k.smax < q.smin || k.smin > q.smax) return Vis::none;
  if (q.smin == q.smax && k.smin == k.smax) {  // one sample on both sides, the same one
    if (k.pmin > q.pmax) return Vis::none;
    if (k.pmax <= q.pmin) return Vis::full;
  }
  return Vis::partial;
}

// The rows (of query tile a) and columns (of key tile b) outside which every
// pair is masked, relative to the tiles' first rows: a row can only matter if
// its sample is among b's and its position reaches b's first, a key only if
// its sample is among a's and its position is not past a's last.
struct Rect {
  int64_t r0 = 0, r1 = 0, c0 = 0, c1 = 0;
  bool empty() const { return r0 >= r1 || c0 >= c1; }
};

Rect trim(const Tile& a, const Tile& b, const int32_t* qs, const int32_t* qp, const int32_t* ks,
          const int32_t* kp, Vis vis) {
  if (vis == Vis::full) return Rect{0, a.end - a.begin, 0, b.end - b.begin};
  Rect r{a.end, a.begin, b.end, b.begin};
  for (int64_t i = a.begin; i < a.end; ++i) {
    if (qs[i] >= b.smin && qs[i] <= b.smax && qp[i] >= b.pmin) {
      r.r0 = std::min(r.r0, i);
      r.r1 = i + 1;
    }
  }
  for (int64_t j = b.begin; j < b.end; ++j) {
    if (ks[j] >= a.smin && ks[j] <= a.smax && kp[j] <= a.pmax) {
      r.c0 = std::min(r.c0, j);
      r.c1 = j + 1;
    }
  }
  r.r0 -= a.begin;
  r.r1 -= a.begin;
  r.c0 -= b.begin;
  r.c1 -= b.begin;
  return r;
}

void check_args(const AttnDims& dims, const AttnOptions& opt) {
  ML_CHECK(dims.n_heads > 0 && dims.n_kv_heads > 0 && dims.n_heads % dims.n_kv_heads == 0 &&
               dims.head_dim > 0,
           "bad attention dimensions");
  ML_CHECK(opt.tile_q > 0 && opt.tile_k > 0, "attention tiles must be positive");
}

// Online softmax over one tile of scores s [rows, cols]: masks (when
// `partial`), replaces s by exp(s − m_new), updates the running max m and sum
// l per row and rescales the accumulated output rows acc [rows, D]. Rows with
// no visible key are left as zeros. Returns whether any row saw a key.
template <class T>
ML_SIMD_CLONES bool softmax_tile(int64_t rows, int64_t cols, T* s, bool partial, const int32_t* qs,
                                 const int32_t* qp, const int32_t* ks, const int32_t* kp, T* m,
                                 T* l, T* acc, int64_t D) {
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  bool any = false;
  for (int64_t r = 0; r < rows; ++r) {
    T* sr = s + r * cols;
    if (partial) {
      const int32_t sample = qs[r], pos = qp[r];
      for (int64_t c = 0; c < cols; ++c) {
        sr[c] = (ks[c] == sample && kp[c] <= pos) ? sr[c] : kNegInf;
      }
    }
    T mx = kNegInf;
#pragma omp simd reduction(max : mx)
    for (int64_t c = 0; c < cols; ++c) mx = std::max(mx, sr[c]);
    if (mx == kNegInf) {
      std::fill(sr, sr + cols, T(0));
      continue;
    }
    any = true;
    const T mnew = std::max(m[r], mx);
    const T corr = fast_exp<T>(m[r] - mnew);
    T sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t c = 0; c < cols; ++c) {
      const T e = fast_exp<T>(sr[c] - mnew);
      sr[c] = e;
      sum += e;
    }
    l[r] = l[r] * corr + sum;
    if (corr != T(1)) {
      T* ar = acc + r * D;
      for (int64_t c = 0; c < D; ++c) ar[c] *= corr;
    }
    m[r] = mnew;
  }
  return any;
}

// Backward: p [rows, cols] holds scaled scores; becomes P = exp(s − lse) on
// visible pairs and 0 elsewhere. lse of row r is lse[r·stride].
template <class T>
ML_SIMD_CLONES void probs_tile(int64_t rows, int64_t cols, T* p, bool partial, const int32_t* qs,
                               const int32_t* qp, const int32_t* ks, const int32_t* kp,
                               const T* lse, int64_t stride) {
  for (int64_t r = 0; r < rows; ++r) {
    T* pr = p + r * cols;
    const T l = lse[r * stride];
    if (partial) {
      const int32_t sample = qs[r], pos = qp[r];
      for (int64_t c = 0; c < cols; ++c) {
        const bool visible = ks[c] == sample && kp[c] <= pos;
        pr[c] = visible ? fast_exp<T>(pr[c] - l) : T(0);
      }
    } else {
      for (int64_t c = 0; c < cols; ++c) pr[c] = fast_exp<T>(pr[c] - l);
    }
  }
}

// dS = P ⊙ (dP − delta) in place of dp; delta of row r is delta[r·stride].
template <class T>
ML_SIMD_CLONES void dscores_tile(int64_t rows, int64_t cols, const T* p, T* dp, const T* delta,
                                 int64_t stride) {
  for (int64_t r = 0; r < rows; ++r) {
    const T d = delta[r * stride];
    T* dpr = dp + r * cols;
    const T* pr = p + r * cols;
    for (int64_t c = 0; c < cols; ++c) dpr[c] = pr[c] * (dpr[c] - d);
  }
}

template <class T>
void forward_unit(const AttnDims& dims, const QueryBlock<T>& q, const KvBlock<T>& kv,
                  const AttnOut<T>& res, const Tile& a, const std::vector<Tile>& ktiles, int64_t h,
                  T* s, T* acc, T* m, T* l) {
  const int64_t D = dims.head_dim, H = dims.n_heads;
  const int64_t g = h / dims.group();
  const T scale = T(1) / std::sqrt(static_cast<T>(D));
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  const int64_t rows = a.end - a.begin;
  const T* qh = q.q + a.begin * q.ld + h * D;
  std::fill(m, m + rows, kNegInf);
  std::fill(l, l + rows, T(0));
  std::fill(acc, acc + rows * D, T(0));
  for (const Tile& b : ktiles) {
    const Vis vis = classify(a, b);
    if (vis == Vis::none) continue;
    const Rect rc = trim(a, b, q.sample, q.pos, kv.sample, kv.pos, vis);
    if (rc.empty()) continue;
    const int64_t nr = rc.r1 - rc.r0, nc = rc.c1 - rc.c0;
    const int64_t qi = a.begin + rc.r0, kj = b.begin + rc.c0;
    gemm<T>(Op::N, Op::T, nr, nc, D, scale, qh + rc.r0 * q.ld, q.ld, kv.k + kj * kv.ldk + g * D,
            kv.ldk, T(0), s, nc);
    const bool any =
        softmax_tile(nr, nc, s, vis == Vis::partial, q.sample + qi, q.pos + qi, kv.sample + kj,
                     kv.pos + kj, m + rc.r0, l + rc.r0, acc + rc.r0 * D, D);
    if (!any) continue;
    gemm<T>(Op::N, Op::N, nr, D, nc, T(1), s, nc, kv.v + kj * kv.ldv + g * D, kv.ldv, T(1),
            acc + rc.r0 * D, D);
  }
  for (int64_t r = 0; r < rows; ++r) {
    T* o = res.out + (a.begin + r) * res.ld + h * D;
    T* lse = res.lse + (a.begin + r) * H + h;
    if (l[r] > T(0)) {
      const T inv = T(1) / l[r];
      for (int64_t c = 0; c < D; ++c) o[c] = acc[r * D + c] * inv;
      *lse = m[r] + std::log(l[r]);
    } else {
      std::fill(o, o + D, T(0));
      *lse = kNegInf;
    }
  }
}

template <class T>
void backward_unit(const AttnDims& dims, const QueryBlock<T>& q, const KvBlock<T>& kv,
                   const QueryGrad<T>& gr, T* dq, int64_t lddq, const KvGrad<T>& kvg,
                   const std::vector<Tile>& qtiles, const std::vector<Tile>& ktiles, int64_t gk,
                   int64_t stripe, int64_t stripes, T* p, T* dp) {
  const int64_t D = dims.head_dim, H = dims.n_heads, G = dims.group();
  const T scale = T(1) / std::sqrt(static_cast<T>(D));
  const int64_t nkt = static_cast<int64_t>(ktiles.size());
  for (int64_t j = stripe; j < nkt; j += stripes) {
    const Tile& b = ktiles[static_cast<size_t>(j)];
    for (int64_t h = gk * G; h < (gk + 1) * G; ++h) {
      for (const Tile& a : qtiles) {
        const Vis vis = classify(a, b);
        if (vis == Vis::none) continue;
        const Rect rc = trim(a, b, q.sample, q.pos, kv.sample, kv.pos, vis);
        if (rc.empty()) continue;
        const int64_t nr = rc.r1 - rc.r0, nc = rc.c1 - rc.c0;
        const int64_t qi = a.begin + rc.r0, kj = b.begin + rc.c0;
        const T* kp = kv.k + kj * kv.ldk + gk * D;
        const T* vp = kv.v + kj * kv.ldv + gk * D;
        T* dkp = kvg.dk + kj * kvg.lddk + gk * D;
        T* dvp = kvg.dv + kj * kvg.lddv + gk * D;
        const T* qp = q.q + qi * q.ld + h * D;
        const T* dop = gr.dout + qi * gr.lddo + h * D;
        // P = exp(scale·QKᵀ - lse) on visible pairs, 0 elsewhere.
        gemm<T>(Op::N, Op::T, nr, nc, D, scale, qp, q.ld, kp, kv.ldk, T(0), p, nc);
        probs_tile(nr, nc, p, vis == Vis::partial, q.sample + qi, q.pos + qi, kv.sample + kj,
                   kv.pos + kj, gr.lse + qi * H + h, H);
        // dV += Pᵀ dO;  dP = dO Vᵀ;  dS = P ⊙ (dP - delta).
        gemm<T>(Op::T, Op::N, nc, D, nr, T(1), p, nc, dop, gr.lddo, T(1), dvp, kvg.lddv);
        gemm<T>(Op::N, Op::T, nr, nc, D, T(1), dop, gr.lddo, vp, kv.ldv, T(0), dp, nc);
        dscores_tile(nr, nc, p, dp, gr.delta + qi * H + h, H);
        // dQ += scale·dS K;  dK += scale·dSᵀ Q.
        gemm<T>(Op::N, Op::N, nr, D, nc, scale, dp, nc, kp, kv.ldk, T(1), dq + qi * lddq + h * D,
                lddq);
        gemm<T>(Op::T, Op::N, nc, D, nr, scale, dp, nc, qp, q.ld, T(1), dkp, kvg.lddk);
      }
    }
  }
}

}  // namespace

template <class T>
void attention_block_forward(const AttnDims& dims, const QueryBlock<T>& q, const KvBlock<T>& kv,
                             const AttnOut<T>& res, const AttnOptions& opt) {
  check_args(dims, opt);
  const int64_t H = dims.n_heads, D = dims.head_dim;
  if (q.n == 0) return;
  if (kv.n == 0) {
    for (int64_t i = 0; i < q.n; ++i) {
      std::fill(res.out + i * res.ld, res.out + i * res.ld + H * D, T(0));
      std::fill(res.lse + i * H, res.lse + (i + 1) * H, -std::numeric_limits<T>::infinity());
    }
    return;
  }
  const std::vector<Tile> qtiles = make_tiles(q.sample, q.pos, q.n, opt.tile_q);
  const std::vector<Tile> ktiles = make_tiles(kv.sample, kv.pos, kv.n, opt.tile_k);
  const int64_t nqt = static_cast<int64_t>(qtiles.size());
  const int64_t units = H * nqt;
  const int threads = static_cast<int>(std::min<int64_t>(std::max(opt.threads, 1), units));
  const int64_t tq = std::min(opt.tile_q, q.n), tk = std::min(opt.tile_k, kv.n);
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    std::vector<T> s(static_cast<size_t>(tq * tk)), acc(static_cast<size_t>(tq * D));
    std::vector<T> m(static_cast<size_t>(tq)), l(static_cast<size_t>(tq));
    // Latest query tiles first: they see the most keys (better dynamic balance).
#pragma omp for schedule(dynamic, 1)
    for (int64_t u = 0; u < units; ++u) {
      const int64_t qi = nqt - 1 - u / H;
      forward_unit(dims, q, kv, res, qtiles[static_cast<size_t>(qi)], ktiles, u % H, s.data(),
                   acc.data(), m.data(), l.data());
    }
  }
}

template <class T>
void attention_merge(const AttnDims& dims, int64_t n, const AttnOut<T>& acc, const T* out,
                     int64_t ld, const T* lse, int threads) {
  const int64_t H = dims.n_heads, D = dims.head_dim;
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1 && n * H * D > 32768)
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t h = 0; h < H; ++h) {
      const T lb = lse[i * H + h];
      T& la = acc.lse[i * H + h];
      if (lb == kNegInf) continue;
      T* oa = acc.out + i * acc.ld + h * D;
      const T* ob = out + i * ld + h * D;
      if (la == kNegInf) {
        std::copy(ob, ob + D, oa);
        la = lb;
        continue;
      }
      const T mx = std::max(la, lb);
      const T wa = std::exp(la - mx), wb = std::exp(lb - mx);
      const T sum = wa + wb;
      const T ca = wa / sum, cb = wb / sum;
      for (int64_t c = 0; c < D; ++c) oa[c] = ca * oa[c] + cb * ob[c];
      la = mx + std::log(sum);
    }
  }
}

template <class T>
void attention_delta(const AttnDims& dims, int64_t n, const T* out, int64_t ldo, const T* dout,
                     int64_t lddo, T* delta, int threads) {
  const int64_t H = dims.n_heads, D = dims.head_dim;
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1 && n * H * D > 32768)
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t h = 0; h < H; ++h) {
      const T* o = out + i * ldo + h * D;
      const T* d = dout + i * lddo + h * D;
      T sum = 0;
      for (int64_t c = 0; c < D; ++c) sum += o[c] * d[c];
      delta[i * H + h] = sum;
    }
  }
}

template <class T>
void attention_block_backward(const AttnDims& dims, const QueryBlock<T>& q, const KvBlock<T>& kv,
                              const QueryGrad<T>& g, const KvGrad<T>& kv_grad,
                              const AttnOptions& opt) {
  check_args(dims, opt);
  if (q.n == 0 || kv.n == 0) return;
  const int64_t H = dims.n_heads, D = dims.head_dim, Hk = dims.n_kv_heads;
  const std::vector<Tile> qtiles = make_tiles(q.sample, q.pos, q.n, opt.tile_q);
  const std::vector<Tile> ktiles = make_tiles(kv.sample, kv.pos, kv.n, opt.tile_k);
  const int threads = std::max(opt.threads, 1);
  // One unit per KV head owns that head's dK, dV and its query heads' dQ.
  // With fewer KV heads than threads (or a remainder), each KV head is cut
  // into `stripes` interleaved sets of key tiles; stripe s > 0 adds its dQ
  // into a private buffer, summed in stripe order afterwards.
  const int64_t stripes = (threads == 1 || Hk % threads == 0) ? 1 : threads;
  const int64_t ld_extra = H * D;
  std::vector<T> extra(static_cast<size_t>((stripes - 1) * q.n * ld_extra), T(0));
  const int64_t units = Hk * stripes;
  const int team = static_cast<int>(std::min<int64_t>(threads, units));
  const int64_t tq = std::min(opt.tile_q, q.n), tk = std::min(opt.tile_k, kv.n);
#pragma omp parallel num_threads(team) if (team > 1)
  {
    std::vector<T> p(static_cast<size_t>(tq * tk)), dp(static_cast<size_t>(tq * tk));
#pragma omp for schedule(dynamic, 1)
    for (int64_t u = 0; u < units; ++u) {
      const int64_t gk = u / stripes, s = u % stripes;
      T* dq = s == 0 ? g.dq : extra.data() + (s - 1) * q.n * ld_extra;
      const int64_t lddq = s == 0 ? g.lddq : ld_extra;
      backward_unit(dims, q, kv, g, dq, lddq, kv_grad, qtiles, ktiles, gk, s, stripes, p.data(),
                    dp.data());
    }
  }
  if (stripes > 1) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < q.n; ++i) {
      T* dst = g.dq + i * g.lddq;
      for (int64_t s = 1; s < stripes; ++s) {
        const T* src = extra.data() + (s - 1) * q.n * ld_extra + i * ld_extra;
        for (int64_t c = 0; c < H * D; ++c) dst[c] += src[c];
      }
    }
  }
}

template <class T>
void LocalAttention<T>::forward(int, const AttnDims& dims, const QueryBlock<T>& q,
                                const KvBlock<T>& kv, const AttnOut<T>& res) {
  attention_block_forward(dims, q, kv, res, opt_);
}

template <class T>
T* LocalAttention<T>::delta_scratch(int64_t size) {
  if (static_cast<int64_t>(delta_.size()) < size) delta_.resize(static_cast<size_t>(size));
  return delta_.data();
}

template <class T>
void LocalAttention<T>::backward(int, const AttnDims& dims, const QueryBlock<T>& q,
                                 const KvBlock<T>& kv, const T* out, int64_t ldo, const T* lse,
                                 const T* dout, int64_t lddo, T* dq, int64_t lddq,
                                 const KvGrad<T>& kv_grad) {
  T* delta = delta_scratch(q.n * dims.n_heads);
  attention_delta(dims, q.n, out, ldo, dout, lddo, delta, opt_.threads);
  QueryGrad<T> g{dout, lddo, lse, delta, dq, lddq};
  attention_block_backward(dims, q, kv, g, kv_grad, opt_);
}

#define ML_ATTENTION_INSTANTIATE(T)                                                                \
  template void attention_block_forward<T>(const AttnDims&, const QueryBlock<T>&,                  \
                                           const KvBlock<T>&, const AttnOut<T>&,                   \
                                           const AttnOptions&);                                    \
  template void attention_merge<T>(const AttnDims&, int64_t, const AttnOut<T>&, const T*, int64_t, \
                                   const T*, int);                                                 \
  template void attention_delta<T>(const AttnDims&, int64_t, const T*, int64_t, const T*, int64_t, \
                                   T*, int);                                                       \
  template void attention_block_backward<T>(const AttnDims&, const QueryBlock<T>&,                 \
                                            const KvBlock<T>&, const QueryGrad<T>&,                \
                                            const KvGrad<T>&, const AttnOptions&);                 \
  template class LocalAttention<T>;

ML_ATTENTION_INSTANTIATE(float)
ML_ATTENTION_INSTANTIATE(double)

}  // namespace meshloom::model
