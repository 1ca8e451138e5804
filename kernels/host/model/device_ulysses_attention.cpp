#include "kernels/host/model/device_ulysses_attention.hpp"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <numeric>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/check.hpp"
#include "base/strings.hpp"
#include "comm/mpi_check.hpp"
#include "kernels/device/common/check.cuh"
#include "kernels/device/model/cast.hpp"
#include "kernels/host/model/device_ring_attention.hpp"
#ifdef MESHLOOM_HAVE_CUDNN
#include "kernels/host/model/cudnn_block_attention.hpp"
#endif

namespace meshloom::cuda {

namespace {

// dst row i, columns [0, w) ← src row i, for n rows (device, asynchronous).
template <class E>
void copy_cols(const E* src, int64_t ls, E* dst, int64_t ld, int64_t n, int64_t w,
               cudaStream_t stream) {
  if (n <= 0 || w <= 0) return;
  CUDA_CHECK(cudaMemcpy2DAsync(dst, size_t(ld) * sizeof(E), src, size_t(ls) * sizeof(E),
                               size_t(w) * sizeof(E), size_t(n), cudaMemcpyDeviceToDevice, stream));
}

// dst row i, columns [0, w) += src row i (fp32).
void add_cols(const float* src, int64_t ls, float* dst, int64_t ld, int64_t n, int64_t w,
              cudaStream_t stream) {
  if (n > 0 && w > 0) add_rows(src, ls, n, w, dst, ld, stream);
}

// The flash kernels on the gathered blocks (plain Ulysses); with cuDNN
// (bf16) its forward runs there where the gathered mask can be planned
// (backward takes delta, not O, which cuDNN's graph needs: flash).
template <class T>
class LocalGathered final : public GatheredDeviceAttention<T> {
 public:
  explicit LocalGathered(AttentionImpl impl) {
#ifdef MESHLOOM_HAVE_CUDNN
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      if (impl == AttentionImpl::cudnn) cudnn_ = std::make_unique<CudnnBlockAttention>();
    }
#endif
  }
  void forward(int, const FlashDims& dims, const FlashQuery<T>& q, const FlashKv<T>& kv,
               const FlashOut<T>& res, cudaStream_t stream) override {
    if (!cudnn_forward(dims, q, kv, res, stream))
      flash_attention_forward<T, T>(dims, q, kv, res, stream);
  }
  void backward(int, const FlashDims& dims, const FlashQuery<T>& q, const FlashKv<T>& kv,
                const FlashQueryGrad<T>& g, const FlashKvGrad& kv_grad,
                cudaStream_t stream) override {
    flash_attention_backward<T>(dims, q, kv, g, kv_grad, stream);
  }
  int64_t cudnn_passes() const override {
#ifdef MESHLOOM_HAVE_CUDNN
    if (cudnn_) return cudnn_->cudnn_passes();
#endif
    return 0;
  }

 private:
  // False where cuDNN did not run (nothing written).
  bool cudnn_forward(const FlashDims& dims, const FlashQuery<T>& q, const FlashKv<T>& kv,
                     const FlashOut<T>& res, cudaStream_t stream) {
#ifdef MESHLOOM_HAVE_CUDNN
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      if (!cudnn_) return false;
      const int64_t qw = int64_t(dims.n_heads) * dims.head_dim;
      acc_.resize(size_t(q.n * qw));
      const FlashOut<float> acc{acc_.data(), qw, res.lse};
      CudnnBlockAttention::clear(dims, q.n, acc, stream);
      if (!cudnn_->forward_step(0, dims, q, kv, acc, stream)) return false;
      convert_rows<float, T>(acc_.data(), qw, q.n, qw, res.out, res.ld, stream);
      return true;
    }
#endif
    return false;
  }

  std::unique_ptr<CudnnBlockAttention> cudnn_;
  DeviceBuffer<float> acc_;
};

// A ring across the subgroups on the gathered blocks (hybrid).
template <class T>
class RingGathered final : public GatheredDeviceAttention<T> {
 public:
  RingGathered(MPI_Comm group, std::vector<int> members, int me, int64_t max_tokens,
               double timeout_s, ncclComm_t nccl, AttentionImpl impl)
      : ring_(group, std::move(members), me, max_tokens, timeout_s, nccl, impl) {}
  void forward(int layer, const FlashDims& dims, const FlashQuery<T>& q, const FlashKv<T>& kv,
               const FlashOut<T>& res, cudaStream_t stream) override {
    ring_.forward(layer, dims, q, kv, res, stream);
  }
  void backward(int, const FlashDims& dims, const FlashQuery<T>& q, const FlashKv<T>& kv,
                const FlashQueryGrad<T>& g, const FlashKvGrad& kv_grad,
                cudaStream_t stream) override {
    ring_.backward_from_delta(dims, q, kv, g, kv_grad, stream);
  }
  int64_t cudnn_passes() const override { return ring_.cudnn_passes(); }

 private:
  DeviceRingAttention<T> ring_;
};

}  // namespace

model::UlyssesHeads device_ulysses_heads(const FlashDims& dims, int k) {
  return model::ulysses_heads({dims.n_heads, dims.n_kv_heads, dims.head_dim}, k);
}

template <class T>
DeviceUlyssesAttention<T>::DeviceUlyssesAttention(MPI_Comm group, double timeout_s, ncclComm_t nccl,
                                                  std::unique_ptr<GatheredDeviceAttention<T>> inner,
                                                  AttentionImpl impl)
    : inner_(std::move(inner)) {
  MPI_CHECK(MPI_Comm_size(group, &k_));
  MPI_CHECK(MPI_Comm_rank(group, &me_));
  link_ = nccl ? nccl_ulysses_link(group, nccl, timeout_s) : mpi_ulysses_link(group, timeout_s);
  if (!inner_) inner_ = std::make_unique<LocalGathered<T>>(impl);
}

template <class T>
UlyssesPlan DeviceUlyssesAttention<T>::plan(bool back) const {
  UlyssesPlan p;
  for (int d = 0; d < k_; ++d) {
    p.send_rows.push_back(n_);
    p.send_at.push_back(d * n_);
  }
  p.recv_rows = count_;
  p.recv_at = at_;
  if (back) {
    std::swap(p.send_rows, p.recv_rows);
    std::swap(p.send_at, p.recv_at);
  }
  return p;
}

template <class T>
void DeviceUlyssesAttention<T>::gather_tokens(const FlashQuery<T>& q, const FlashKv<T>& kv,
                                              cudaStream_t stream) {
  ML_CHECK(q.n == kv.n, "Ulysses attention: queries and keys are the same tokens");
  if (n_ >= 0) {
    ML_CHECK(q.n == n_, strf("Ulysses attention: %lld tokens, not the %lld of the first layer",
                             (long long)q.n, (long long)n_));
    return;
  }
  n_ = q.n;
  count_ = link_->gather_counts(n_, stream);
  at_.assign(size_t(k_), 0);
  total_ = 0;
  for (int d = 0; d < k_; ++d) {
    at_[size_t(d)] = total_;
    total_ += count_[size_t(d)];
  }
  // Every member's ids to every member: an all-gather (every section at 0).
  UlyssesPlan ids = plan(false);
  ids.send_at.assign(size_t(k_), 0);
  sample_.resize(size_t(total_));
  pos_.resize(size_t(total_));
  link_->exchange(
      {{q.sample, sample_.data(), sizeof(int32_t)}, {q.pos, pos_.data(), sizeof(int32_t)}}, ids,
      stream);
}

template <class T>
void DeviceUlyssesAttention<T>::pack_qkv(const model::UlyssesHeads& h, int64_t D,
                                         const FlashQuery<T>& q, const FlashKv<T>& kv,
                                         int64_t width, cudaStream_t stream) {
  const int64_t n = n_;
  for (int d = 0; d < k_; ++d) {
    T* sec = send_.data() + d * n * width;
    copy_cols(q.q + d * h.q * D, q.ld, sec, width, n, h.q * D, stream);
    for (int j = 0; j < h.v; ++j) {
      const int64_t col = int64_t(h.kv_head(d, j)) * D;
      copy_cols(kv.k + col, kv.ldk, sec + (h.q + j) * D, width, n, D, stream);
      copy_cols(kv.v + col, kv.ldv, sec + (h.q + h.v + j) * D, width, n, D, stream);
    }
  }
}

template <class T>
void DeviceUlyssesAttention<T>::forward(int layer, const FlashDims& dims, const FlashQuery<T>& q,
                                        const FlashKv<T>& kv, const FlashOut<T>& res,
                                        cudaStream_t stream) {
  const model::UlyssesHeads h = device_ulysses_heads(dims, k_);  // before any message
  gather_tokens(q, kv, stream);
  const int64_t D = dims.head_dim, n = n_, N = total_, qw = h.q * D, vw = h.v * D;
  const int64_t width = qw + 2 * vw;
  send_.resize(size_t(k_ * n * width));
  pack_qkv(h, D, q, kv, width, stream);
  sharded_.resize(size_t(N * width));
  link_->exchange({{send_.data(), sharded_.data(), size_t(width) * sizeof(T)}}, plan(false),
                  stream);

  // Attention over all the group's tokens for this member's heads.
  result_.resize(size_t(N * qw));
  lse_.resize(size_t(N * h.q));
  const T* s = sharded_.data();
  const FlashDims local{int(h.q), int(h.v), dims.head_dim};
  if (N > 0)
    inner_->forward(layer, local, FlashQuery<T>{s, width, sample_.data(), pos_.data(), N},
                    FlashKv<T>{s + qw, s + qw + vw, width, width, sample_.data(), pos_.data(), N},
                    FlashOut<T>{result_.data(), qw, lse_.data()}, stream);

  // Back to the owners: section d holds member d's heads.
  back_.resize(size_t(k_ * n * qw));
  back_lse_.resize(size_t(k_ * n * h.q));
  link_->exchange({{result_.data(), back_.data(), size_t(qw) * sizeof(T)},
                   {lse_.data(), back_lse_.data(), size_t(h.q) * sizeof(float)}},
                  plan(true), stream);
  for (int d = 0; d < k_; ++d) {
    copy_cols(back_.data() + d * n * qw, qw, res.out + d * qw, res.ld, n, qw, stream);
    copy_cols(back_lse_.data() + d * n * h.q, int64_t(h.q), res.lse + d * h.q,
              int64_t(dims.n_heads), n, int64_t(h.q), stream);
  }
}

template <class T>
void DeviceUlyssesAttention<T>::backward(int layer, const FlashDims& dims, const FlashQuery<T>& q,
                                         const FlashKv<T>& kv, const T* out, int64_t ldo,
                                         const float* lse, const T* dout, int64_t lddo, float* dq,
                                         int64_t lddq, const FlashKvGrad& kv_grad,
                                         cudaStream_t stream) {
  const model::UlyssesHeads h = device_ulysses_heads(dims, k_);
  gather_tokens(q, kv, stream);
  const int64_t D = dims.head_dim, H = dims.n_heads, n = n_, N = total_, qw = h.q * D, vw = h.v * D,
                hq = h.q;
  const int64_t width = 2 * qw + 2 * vw;  // Q, K, V, dO
  // The owner computes delta: O stays home.
  delta_.resize(size_t(n * H));
  if (n > 0) flash_attention_delta<T, T>(dims, n, out, ldo, dout, lddo, delta_.data(), stream);
  send_.resize(size_t(k_ * n * width));
  pack_qkv(h, D, q, kv, width, stream);
  // lse and delta of member d's heads: two dense [n, q] sections each.
  fsend_.resize(size_t(2 * k_ * n * hq));
  float* lse_out = fsend_.data();
  float* delta_out = fsend_.data() + k_ * n * hq;
  for (int d = 0; d < k_; ++d) {
    copy_cols(dout + d * qw, lddo, send_.data() + d * n * width + qw + 2 * vw, width, n, qw,
              stream);
    copy_cols(lse + d * hq, H, lse_out + d * n * hq, hq, n, hq, stream);
    copy_cols(delta_.data() + d * hq, H, delta_out + d * n * hq, hq, n, hq, stream);
  }
  sharded_.resize(size_t(N * width));
  glse_.resize(size_t(N * hq));
  gdelta_.resize(size_t(N * hq));
  link_->exchange({{send_.data(), sharded_.data(), size_t(width) * sizeof(T)},
                   {lse_out, glse_.data(), size_t(hq) * sizeof(float)},
                   {delta_out, gdelta_.data(), size_t(hq) * sizeof(float)}},
                  plan(false), stream);

  const int64_t gw = qw + 2 * vw;  // dQ, dK, dV
  grads_.resize(size_t(N * gw));
  if (N > 0) {
    CUDA_CHECK(cudaMemsetAsync(grads_.data(), 0, size_t(N * gw) * sizeof(float), stream));
    const T* s = sharded_.data();
    float* g = grads_.data();
    const FlashDims local{int(h.q), int(h.v), dims.head_dim};
    inner_->backward(layer, local, FlashQuery<T>{s, width, sample_.data(), pos_.data(), N},
                     FlashKv<T>{s + qw, s + qw + vw, width, width, sample_.data(), pos_.data(), N},
                     FlashQueryGrad<T>{s + qw + 2 * vw, width, glse_.data(), gdelta_.data(), g, gw},
                     FlashKvGrad{g + qw, g + qw + vw, gw, gw}, stream);
  }
  back_grads_.resize(size_t(k_ * n * gw));
  link_->exchange({{grads_.data(), back_grads_.data(), size_t(gw) * sizeof(float)}}, plan(true),
                  stream);
  // Member order, then local KV head order: replicated heads always sum the
  // same way.
  for (int d = 0; d < k_; ++d) {
    const float* sec = back_grads_.data() + d * n * gw;
    add_cols(sec, gw, dq + d * qw, lddq, n, qw, stream);
    for (int j = 0; j < h.v; ++j) {
      const int64_t col = int64_t(h.kv_head(d, j)) * D;
      add_cols(sec + qw + j * D, gw, kv_grad.dk + col, kv_grad.lddk, n, D, stream);
      add_cols(sec + qw + vw + j * D, gw, kv_grad.dv + col, kv_grad.lddv, n, D, stream);
    }
  }
}

template <class T>
std::unique_ptr<DeviceAttention<T>> device_hybrid_attention(MPI_Comm group, MPI_Comm subgroup,
                                                            int u, int64_t max_tokens,
                                                            double timeout_s, ncclComm_t group_nccl,
                                                            ncclComm_t sub_nccl,
                                                            AttentionImpl impl) {
  int k = 0, me = 0, sub = 0;
  MPI_CHECK(MPI_Comm_size(group, &k));
  MPI_CHECK(MPI_Comm_rank(group, &me));
  ML_CHECK(
      u >= 1 && k % u == 0,
      strf("a hybrid CP group of %d members cannot be cut into Ulysses subgroups of %d", k, u));
  ML_CHECK(subgroup != MPI_COMM_NULL, "hybrid attention on the GPU needs its Ulysses subgroup");
  MPI_CHECK(MPI_Comm_size(subgroup, &sub));
  ML_CHECK(sub == u, strf("hybrid attention: a subgroup of %d members, not %d", sub, u));
  ML_CHECK((group_nccl == nullptr) == (sub_nccl == nullptr),
           "hybrid attention: NCCL for the ring and the subgroup, or for neither");
  // The ring of member me: the members at the same place in every subgroup.
  std::vector<int> ring;
  for (int m = me % u; m < k; m += u) ring.push_back(m);
  auto inner = std::make_unique<RingGathered<T>>(group, std::move(ring), me / u, u * max_tokens,
                                                 timeout_s, group_nccl, impl);
  return std::make_unique<DeviceUlyssesAttention<T>>(subgroup, timeout_s, sub_nccl,
                                                     std::move(inner), impl);
}

template class DeviceUlyssesAttention<float>;
template class DeviceUlyssesAttention<__nv_bfloat16>;
template std::unique_ptr<DeviceAttention<float>> device_hybrid_attention<float>(
    MPI_Comm, MPI_Comm, int, int64_t, double, ncclComm_t, ncclComm_t, AttentionImpl);
template std::unique_ptr<DeviceAttention<__nv_bfloat16>> device_hybrid_attention<__nv_bfloat16>(
    MPI_Comm, MPI_Comm, int, int64_t, double, ncclComm_t, ncclComm_t, AttentionImpl);

}  // namespace meshloom::cuda
