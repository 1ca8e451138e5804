#include "kernels/host/model/device_lm_loss.hpp"

#include <cuda_bf16.h>

#include <algorithm>
#include <string>

#include "base/check.hpp"

namespace meshloom::cuda {

template <class T>
DeviceLmLoss<T>::DeviceLmLoss(int64_t chunk, Blas& blas, cudaStream_t stream)
    : chunk_(chunk), blas_(blas), stream_(stream) {
  ML_CHECK(chunk_ >= 1, "the loss chunk must be at least 1 token, not " + std::to_string(chunk_));
}

template <class T>
void DeviceLmLoss<T>::reserve(int64_t n, int64_t rows, int64_t d) {
  const size_t m = size_t(std::min(n, chunk_));
  logits_.resize(m * size_t(rows));
  stats_.resize(3 * m);
  dxf_.resize(size_t(n * d));
  dhead_.resize(size_t(rows * d));
}

template <class T>
void DeviceLmLoss<T>::forward(const T* xf, int64_t n, const DeviceHead<T>& head,
                              const int32_t* targets, DeviceTpComm<T>* tp, double* row_loss) {
  ML_CHECK(head.vocab.rows >= 1 && head.d >= 1 && head.vocab.first >= 0,
           "DeviceLmLoss: empty head shard");
  reserve(n, head.vocab.rows, head.d);
  n_ = n;
  rows_ = head.vocab.rows;
  d_ = head.d;
  have_forward_ = true;
  if (n == 0) dhead_.zero(stream_);
  for (int64_t t0 = 0; t0 < n; t0 += chunk_)
    chunk_forward(xf, t0, std::min(chunk_, n - t0), head, targets, tp, row_loss);
}

// Tokens [t0, t0 + m): logits, their softmax − onehot, and both gradients'
// shares of the chunk.
template <class T>
void DeviceLmLoss<T>::chunk_forward(const T* xf, int64_t t0, int64_t m, const DeviceHead<T>& head,
                                    const int32_t* targets, DeviceTpComm<T>* tp, double* row_loss) {
  const int64_t rows = head.vocab.rows, d = head.d;
  const T* x = xf + t0 * d;
  T* z = logits_.data();
  blas_.gemm(Op::N, Op::T, m, rows, d, 1.0f, x, d, head.weight, d, 0.0f, z, rows, dtype_of<T>(),
             dtype_of<T>());
  softmax_minus_onehot(m, head, targets + t0, tp, row_loss + t0);
  blas_.gemm(Op::N, Op::N, m, d, rows, 1.0f, z, rows, head.weight, d, 0.0f, dxf_.data() + t0 * d, d,
             dtype_of<T>(), dtype_of<T>());
  blas_.gemm(Op::T, Op::N, rows, d, m, 1.0f, z, rows, x, d, t0 == 0 ? 0.0f : 1.0f, dhead_.data(), d,
             dtype_of<T>(), Dtype::f32);
}

// The chunk's logits of m tokens become softmax − onehot over the whole
// vocabulary (rows without a target: 0), and row_loss = −log p(target).
template <class T>
void DeviceLmLoss<T>::softmax_minus_onehot(int64_t m, const DeviceHead<T>& head,
                                           const int32_t* targets, DeviceTpComm<T>* tp,
                                           double* row_loss) {
  T* z = logits_.data();
  double* mx = stats_.data();
  double* sum = stats_.data() + m;
  double* target_logit = stats_.data() + 2 * m;  // summed with `sum`: one collective
  lm_loss_shard_max<T>(z, m, head.vocab, targets, mx, target_logit, stream_);
  if (tp) tp->all_reduce_max(mx, m, stream_);
  lm_loss_shard_sums<T>(z, m, head.vocab.rows, targets, mx, sum, stream_);
  if (tp) tp->all_reduce_sum(sum, 2 * m, stream_);
  lm_loss_softmax_grad<T>(z, m, head.vocab, targets, mx, sum, target_logit, row_loss, stream_);
}

template <class T>
void DeviceLmLoss<T>::backward(float scale, T* dxf, float* dhead) {
  ML_CHECK(have_forward_, "DeviceLmLoss::backward() needs a forward() first");
  scale_into<T>(dxf_.data(), n_ * d_, scale, dxf, stream_);
  add_scaled(dhead_.data(), rows_ * d_, scale, dhead, stream_);
}

template class DeviceLmLoss<float>;
template class DeviceLmLoss<__nv_bfloat16>;

}  // namespace meshloom::cuda
