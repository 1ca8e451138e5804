#include "model/lm_loss.hpp"

#include <algorithm>
#include <cmath>

#include "base/check.hpp"
#include "base/strings.hpp"
#include "model/blas.hpp"
#include "model/math.hpp"

namespace meshloom::model {
namespace {

// Row loops go parallel above this many elements.
constexpr int64_t kParallelElems = 1 << 15;

// Row kernels (no threading; ML_SIMD_CLONES picks the vector width at load time).

template <class T>
ML_SIMD_CLONES T row_max(int64_t cols, const T* z) {
  T mx = z[0];
#pragma omp simd reduction(max : mx)
  for (int64_t c = 0; c < cols; ++c) mx = std::max(mx, z[c]);
  return mx;
}

// z = exp(z − mx); returns Σ z.
template <class T>
ML_SIMD_CLONES T exp_row(int64_t cols, T* z, T mx) {
  T sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < cols; ++c) {
    const T e = fast_exp<T>(z[c] - mx);
    z[c] = e;
    sum += e;
  }
  return sum;
}

template <class T>
ML_SIMD_CLONES void scale_row(int64_t cols, T* z, T factor) {
  for (int64_t c = 0; c < cols; ++c) z[c] *= factor;
}

// The target's column in the shard, or −1 when another shard holds it (or
// the token has no target).
template <class T>
int64_t local_column(const HeadShard<T>& head, int32_t target) {
  const int64_t c = static_cast<int64_t>(target) - head.first;
  return target >= 0 && c >= 0 && c < head.rows ? c : -1;
}

// dst = factor·src.
template <class T>
void write_scaled(int threads, int64_t count, T factor, const T* src, T* dst) {
#pragma omp parallel for num_threads(threads) schedule(static) if (count > kParallelElems)
  for (int64_t i = 0; i < count; ++i) dst[i] = factor * src[i];
}

// dst += factor·src.
template <class T>
void add_scaled(int threads, int64_t count, T factor, const T* src, T* dst) {
#pragma omp parallel for num_threads(threads) schedule(static) if (count > kParallelElems)
  for (int64_t i = 0; i < count; ++i) dst[i] += factor * src[i];
}

// The three passes over a chunk's logits z [m, rows]; between them the
// shards combine what the pass before produced.

// Per token: the shard's largest logit, and the target's logit (0 where
// another shard holds the target).
template <class T>
void shard_max_and_target(int threads, int64_t m, const HeadShard<T>& head, const T* z,
                          const int32_t* targets, double* mx, double* target_logit) {
  const int64_t rows = head.rows;
#pragma omp parallel for num_threads(threads) schedule(static) if (m * rows > kParallelElems)
  for (int64_t i = 0; i < m; ++i) {
    const int64_t c = local_column(head, targets[i]);
    mx[i] = static_cast<double>(row_max(rows, z + i * rows));
    target_logit[i] = c >= 0 ? static_cast<double>(z[i * rows + c]) : 0.0;
  }
}

// z = exp(z − max) with the group's max, and per token the shard's sum of
// them (tokens without a target are left alone: their rows become 0).
template <class T>
void shard_exponentials(int threads, int64_t m, int64_t rows, T* z, const int32_t* targets,
                        const double* mx, double* sum) {
#pragma omp parallel for num_threads(threads) schedule(static) if (m * rows > kParallelElems)
  for (int64_t i = 0; i < m; ++i) {
    sum[i] = targets[i] < 0 ? 0.0 : static_cast<double>(exp_row(rows, z + i * rows, T(mx[i])));
  }
}

// With the group's max, sum and target logit: z = softmax − onehot (0 rows
// without a target) and token_loss = −log p(target).
template <class T>
void softmax_minus_onehot_rows(int threads, int64_t m, const HeadShard<T>& head, T* z,
                               const int32_t* targets, const double* mx, const double* sum,
                               const double* target_logit, double* token_loss) {
  const int64_t rows = head.rows;
#pragma omp parallel for num_threads(threads) schedule(static) if (m * rows > kParallelElems)
  for (int64_t i = 0; i < m; ++i) {
    T* row = z + i * rows;
    if (targets[i] < 0) {
      std::fill(row, row + rows, T(0));
      token_loss[i] = 0.0;
      continue;
    }
    // −log p(target) = log Σ exp(z − max) − (z_target − max).
    token_loss[i] = std::log(sum[i]) - (target_logit[i] - mx[i]);
    scale_row(rows, row, static_cast<T>(1.0 / sum[i]));
    const int64_t c = local_column(head, targets[i]);
    if (c >= 0) row[c] -= T(1);
  }
}

}  // namespace

template <class T>
LmLoss<T>::LmLoss(const LmLossOptions& opt)
    : chunk_(opt.chunk), threads_(std::max(1, opt.threads)) {
  ML_CHECK(chunk_ >= 1, strf("the loss chunk must be at least 1 token, not %lld",
                             static_cast<long long>(chunk_)));
}

template <class T>
void LmLoss<T>::fit_token_buffers(int64_t n) {
  const auto m = static_cast<size_t>(std::min(n, chunk_));
  if (max_.size() < m) max_.resize(m);
  if (sums_.size() < 2 * m) sums_.resize(2 * m);
}

template <class T>
void LmLoss<T>::reserve(int64_t n, int64_t rows, int64_t d) {
  auto fit = [](auto& v, int64_t size) {
    if (static_cast<int64_t>(v.size()) < size) v.resize(static_cast<size_t>(size));
  };
  fit(logits_, std::min(n, chunk_) * rows);
  fit_token_buffers(n);
  fit(dxf_, n * d);
  fit(dhead_, rows * d);
}

template <class T>
int64_t LmLoss<T>::buffer_bytes() const {
  return static_cast<int64_t>((logits_.capacity() + dxf_.capacity() + dhead_.capacity()) *
                                  sizeof(T) +
                              (max_.capacity() + sums_.capacity()) * sizeof(double));
}

template <class T>
LossSum LmLoss<T>::forward(const T* xf, int64_t n, const HeadShard<T>& head, const int32_t* targets,
                           VocabReducer& vocab, std::span<double> token_loss, Profile* profile) {
  reserve(n, head.rows, head.d);
  const LossSum out = run(xf, n, head, targets, vocab, token_loss, logits_.data(), T(1),
                          dxf_.data(), dhead_.data(), false, profile);
  grads_written_ = false;
  return out;
}

template <class T>
LossSum LmLoss<T>::forward_with_grads(const T* xf, int64_t n, const HeadShard<T>& head,
                                      const int32_t* targets, VocabReducer& vocab,
                                      std::span<double> token_loss, const LossGrads<T>& grads,
                                      Profile* profile) {
  fit_token_buffers(n);
  T* z = logits_for(n, head.rows, grads.scratch);
  const LossSum out = run(xf, n, head, targets, vocab, token_loss, z, static_cast<T>(grads.scale),
                          grads.dxf, grads.dhead, true, profile);
  grads_written_ = true;
  return out;
}

template <class T>
LossSum LmLoss<T>::forward_loss_only(const T* xf, int64_t n, const HeadShard<T>& head,
                                     const int32_t* targets, VocabReducer& vocab,
                                     std::span<double> token_loss, std::span<T> scratch,
                                     Profile* profile) {
  fit_token_buffers(n);
  T* z = logits_for(n, head.rows, scratch);
  const LossSum out =
      run(xf, n, head, targets, vocab, token_loss, z, T(1), nullptr, nullptr, false, profile);
  have_forward_ = false;  // nothing kept for backward()
  return out;
}

template <class T>
T* LmLoss<T>::logits_for(int64_t n, int64_t rows, std::span<T> scratch) {
  const int64_t need = std::min(n, chunk_) * rows;
  if (static_cast<int64_t>(scratch.size()) >= need) return scratch.data();
  if (static_cast<int64_t>(logits_.size()) < need) logits_.resize(static_cast<size_t>(need));
  return logits_.data();
}

template <class T>
LossSum LmLoss<T>::run(const T* xf, int64_t n, const HeadShard<T>& head, const int32_t* targets,
                       VocabReducer& vocab, std::span<double> token_loss, T* z, T alpha, T* dxf,
                       T* dhead, bool accumulate, Profile* profile) {
  ML_CHECK(head.rows >= 1 && head.d >= 1 && head.first >= 0, "LmLoss: empty head shard");
  ML_CHECK(static_cast<int64_t>(token_loss.size()) >= n, "LmLoss: token_loss too short");
  n_ = n;
  rows_ = head.rows;
  d_ = head.d;
  have_forward_ = true;
  const int64_t rows = rows_, d = d_;
  if (n == 0 && !accumulate && dhead) std::fill(dhead, dhead + rows * d, T(0));
  for (int64_t t0 = 0; t0 < n; t0 += chunk_) {
    // Tokens [t0, t0 + m): logits, their softmax − onehot, and both
    // gradients' shares of the chunk.
    const int64_t m = std::min(chunk_, n - t0);
    const T* x = xf + t0 * d;
    {
      Timer t(profile, &Times::head, threads_);
      gemm_parallel<T>(threads_, Op::N, Op::T, m, rows, d, T(1), x, d, head.weight, d, T(0), z,
                       rows);
    }
    {
      Timer t(profile, &Times::loss, threads_);
      softmax_minus_onehot(z, m, head, targets + t0, vocab, token_loss.data() + t0);
    }
    if (!dxf) continue;  // the loss alone
    Timer t(profile, &Times::head, threads_);
    gemm_parallel<T>(threads_, Op::N, Op::N, m, d, rows, alpha, z, rows, head.weight, d, T(0),
                     dxf + t0 * d, d);
    gemm_parallel<T>(threads_, Op::T, Op::N, rows, d, m, alpha, z, rows, x, d,
                     t0 == 0 && !accumulate ? T(0) : T(1), dhead, d);
  }
  LossSum out;
  for (int64_t i = 0; i < n; ++i) {
    out.sum += token_loss[static_cast<size_t>(i)];
    out.count += targets[i] >= 0 ? 1 : 0;
  }
  return out;
}

// z's m tokens of logits become softmax − onehot over the whole vocabulary
// (rows without a target: 0), and token_loss[i] = −log p(target).
template <class T>
void LmLoss<T>::softmax_minus_onehot(T* z, int64_t m, const HeadShard<T>& head,
                                     const int32_t* targets, VocabReducer& vocab,
                                     double* token_loss) {
  double* mx = max_.data();
  double* sum = sums_.data();
  double* target_logit = sums_.data() + m;  // summed with `sum`: one collective
  shard_max_and_target(threads_, m, head, z, targets, mx, target_logit);
  vocab.all_reduce_max(std::span<double>(mx, static_cast<size_t>(m)));
  shard_exponentials(threads_, m, head.rows, z, targets, mx, sum);
  vocab.all_reduce_sum(std::span<double>(sum, static_cast<size_t>(2 * m)));
  softmax_minus_onehot_rows(threads_, m, head, z, targets, mx, sum, target_logit, token_loss);
}

template <class T>
void LmLoss<T>::backward(double scale, T* dxf, T* dhead, Profile* profile) const {
  ML_CHECK(have_forward_, "LmLoss::backward() needs a forward() first");
  ML_CHECK(!grads_written_, "LmLoss::backward(): forward_with_grads() already wrote the gradients");
  Timer t(profile, &Times::head, threads_);
  const T a = static_cast<T>(scale);
  write_scaled(threads_, n_ * d_, a, dxf_.data(), dxf);
  add_scaled(threads_, rows_ * d_, a, dhead_.data(), dhead);
}

template class LmLoss<float>;
template class LmLoss<double>;

}  // namespace meshloom::model
