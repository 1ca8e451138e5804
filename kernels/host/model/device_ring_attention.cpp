#include "kernels/host/model/device_ring_attention.hpp"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <type_traits>
#include <utility>

#include "base/check.hpp"
#include "kernels/device/model/cast.hpp"
#ifdef MESHLOOM_HAVE_CUDNN
#include "kernels/host/model/cudnn_block_attention.hpp"
#endif

namespace meshloom::cuda {

template <class T>
DeviceRingAttention<T>::DeviceRingAttention(MPI_Comm comm, std::vector<int> members, int me,
                                            int64_t max_tokens, double timeout_s, ncclComm_t nccl,
                                            AttentionImpl impl)
    : k_(int(members.size())) {
  ML_CHECK(me >= 0 && me < k_, "ring member index out of range");
  RingSpec ring{comm, std::move(members), me, max_tokens, timeout_s};
  link_ = nccl ? nccl_ring_link<T>(std::move(ring), nccl) : mpi_ring_link<T>(std::move(ring));
#ifdef MESHLOOM_HAVE_CUDNN
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    if (impl == AttentionImpl::cudnn) cudnn_ = std::make_unique<CudnnBlockAttention>();
  }
#endif
}

template <class T>
DeviceRingAttention<T>::~DeviceRingAttention() = default;

template <class T>
int64_t DeviceRingAttention<T>::cudnn_passes() const {
#ifdef MESHLOOM_HAVE_CUDNN
  if (cudnn_) return cudnn_->cudnn_passes();
#endif
  return 0;
}

template <class T>
bool DeviceRingAttention<T>::cudnn_forward(int step, const FlashDims& dims, const FlashQuery<T>& q,
                                           const FlashKv<T>& block, const FlashOut<float>& acc,
                                           cudaStream_t stream) {
#ifdef MESHLOOM_HAVE_CUDNN
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return cudnn_ && cudnn_->forward_step(step, dims, q, block, acc, stream);
  }
#endif
  return false;
}

template <class T>
bool DeviceRingAttention<T>::cudnn_backward(int step, const FlashDims& dims, const FlashQuery<T>& q,
                                            const FlashKv<T>& block, const FlashQueryGrad<T>& g,
                                            const T* out, int64_t ldo, const FlashKvGrad& grad,
                                            cudaStream_t stream) {
#ifdef MESHLOOM_HAVE_CUDNN
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return cudnn_ && out &&
           cudnn_->backward_step(step, dims, q, block, out, ldo, g.lse, g.dout, g.lddo, g.dq,
                                 g.lddq, grad, stream);
  }
#endif
  return false;
}

template <class T>
void DeviceRingAttention<T>::forward(int, const FlashDims& dims, const FlashQuery<T>& q,
                                     const FlashKv<T>& kv, const FlashOut<T>& res,
                                     cudaStream_t stream) {
  const int64_t kv_dim = int64_t(dims.n_kv_heads) * dims.head_dim;
  const int64_t qw = int64_t(dims.n_heads) * dims.head_dim;
  acc_.resize(size_t(q.n * qw));
  part_.resize(size_t(q.n * qw));
  part_lse_.resize(size_t(q.n * dims.n_heads));
  const FlashOut<float> acc{acc_.data(), qw, res.lse};
  link_->load(kv, kv_dim, false, stream);
#ifdef MESHLOOM_HAVE_CUDNN
  // cuDNN's steps all merge into the accumulator: it starts empty.
  if (cudnn_) CudnnBlockAttention::clear(dims, q.n, acc, stream);
#endif
  for (int step = 0; step < k_; ++step) {
    // The next block travels while the kernels run on this one.
    const bool more = step + 1 < k_;
    if (more) link_->start(stream);
    const FlashKv<T> block = step == 0 ? kv : link_->current(stream).kv;
    if (cudnn_forward(step, dims, q, block, acc, stream)) {
      // cuDNN merged this step in.
    } else if (step == 0 && !cudnn_) {
      flash_attention_forward<T, float>(dims, q, kv, acc, stream);
    } else {
      flash_attention_forward<T, float>(
          dims, q, block, FlashOut<float>{part_.data(), qw, part_lse_.data()}, stream);
      flash_attention_merge<float>(dims, q.n, acc, part_.data(), qw, part_lse_.data(), stream);
    }
    if (more) link_->finish(stream);
  }
  convert_rows<float, T>(acc_.data(), qw, q.n, qw, res.out, res.ld, stream);
}

template <class T>
void DeviceRingAttention<T>::backward(int, const FlashDims& dims, const FlashQuery<T>& q,
                                      const FlashKv<T>& kv, const T* out, int64_t ldo,
                                      const float* lse, const T* dout, int64_t lddo, float* dq,
                                      int64_t lddq, const FlashKvGrad& kv_grad,
                                      cudaStream_t stream) {
  delta_.resize(size_t(q.n * dims.n_heads));
  flash_attention_delta<T, T>(dims, q.n, out, ldo, dout, lddo, delta_.data(), stream);
  backward_steps(dims, q, kv, FlashQueryGrad<T>{dout, lddo, lse, delta_.data(), dq, lddq}, out, ldo,
                 kv_grad, stream);
}

template <class T>
void DeviceRingAttention<T>::backward_from_delta(const FlashDims& dims, const FlashQuery<T>& q,
                                                 const FlashKv<T>& kv, const FlashQueryGrad<T>& g,
                                                 const FlashKvGrad& kv_grad, cudaStream_t stream) {
  backward_steps(dims, q, kv, g, nullptr, 0, kv_grad, stream);
}

template <class T>
void DeviceRingAttention<T>::backward_steps(const FlashDims& dims, const FlashQuery<T>& q,
                                            const FlashKv<T>& kv, const FlashQueryGrad<T>& g,
                                            const T* out, int64_t ldo, const FlashKvGrad& kv_grad,
                                            cudaStream_t stream) {
  const int64_t kv_dim = int64_t(dims.n_kv_heads) * dims.head_dim;
  link_->load(kv, kv_dim, true, stream);  // own block with zeroed dK/dV travels
  for (int step = 0; step < k_; ++step) {
    // K/V go ahead while the kernels run; the accumulators follow them, with
    // what this member added (k passes bring them home, the last one alone).
    if (step + 1 < k_) link_->start(stream);
    const RingBlock<T> block = link_->current(stream);
    if (!cudnn_backward(step, dims, q, block.kv, g, out, ldo, block.grad, stream))
      flash_attention_backward<T>(dims, q, block.kv, g, block.grad, stream);
    link_->finish(stream);
  }
  // After k shifts the block in hand is this member's own, with every
  // member's contribution to its dK/dV.
  const RingBlock<T> home = link_->current(stream);
  ML_CHECK(home.kv.n == kv.n, "ring attention: the returning block is not this member's");
  add_rows(home.grad.dk, kv_dim, kv.n, kv_dim, kv_grad.dk, kv_grad.lddk, stream);
  add_rows(home.grad.dv, kv_dim, kv.n, kv_dim, kv_grad.dv, kv_grad.lddv, stream);
}

template class DeviceRingAttention<float>;
template class DeviceRingAttention<__nv_bfloat16>;

}  // namespace meshloom::cuda
