#include "kernels/model/device_ring_attention.hpp"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstring>

#include "base/check.hpp"
#include "comm/ring_shift.hpp"
#include "kernels/common/check.cuh"
#include "kernels/model/cast.hpp"

namespace meshloom::kernels {

namespace {
constexpr int kTagForward = 300;  // the CPU ring's tags: one protocol
constexpr int kTagBackward = 301;
}  // namespace

template <class T>
DeviceRingAttention<T>::DeviceRingAttention(MPI_Comm comm, std::vector<int> members, int me,
                                            int64_t max_tokens, double timeout_s)
    : comm_(comm),
      members_(std::move(members)),
      me_(me),
      max_tokens_(max_tokens),
      timeout_s_(timeout_s) {
  ML_CHECK(me_ >= 0 && me_ < int(members_.size()), "ring member index out of range");
}

template <class T>
size_t DeviceRingAttention<T>::block_bytes(int64_t n, int64_t kv_dim, bool with_grads) {
  const size_t rows = size_t(n) * size_t(kv_dim);
  return sizeof(int64_t) + 2 * rows * sizeof(T) + 2 * size_t(n) * sizeof(int32_t) +
         (with_grads ? 2 * rows * sizeof(float) : 0);
}

template <class T>
void DeviceRingAttention<T>::pack(const FlashKv<T>& kv, int64_t kv_dim, bool with_grads, Block* b,
                                  cudaStream_t stream) const {
  b->n = kv.n;
  b->bytes.assign(block_bytes(kv.n, kv_dim, with_grads), 0);  // dK/dV start at zero
  char* p = b->bytes.data();
  std::memcpy(p, &kv.n, sizeof(int64_t));
  p += sizeof(int64_t);
  const size_t row = size_t(kv_dim) * sizeof(T);
  if (kv.n > 0) {
    CUDA_CHECK(cudaMemcpy2DAsync(p, row, kv.k, size_t(kv.ldk) * sizeof(T), row, size_t(kv.n),
                                 cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaMemcpy2DAsync(p + kv.n * row, row, kv.v, size_t(kv.ldv) * sizeof(T), row,
                                 size_t(kv.n), cudaMemcpyDeviceToHost, stream));
    int32_t* ids = reinterpret_cast<int32_t*>(p + 2 * kv.n * row);
    CUDA_CHECK(cudaMemcpyAsync(ids, kv.sample, size_t(kv.n) * sizeof(int32_t),
                               cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaMemcpyAsync(ids + kv.n, kv.pos, size_t(kv.n) * sizeof(int32_t),
                               cudaMemcpyDeviceToHost, stream));
  }
  CUDA_CHECK(cudaStreamSynchronize(stream));
}

template <class T>
FlashKv<T> DeviceRingAttention<T>::upload(const Block& b, int64_t kv_dim, bool with_grads,
                                          cudaStream_t stream) {
  const int64_t n = b.n;
  const size_t rows = size_t(n) * size_t(kv_dim);
  k_.resize(rows);
  v_.resize(rows);
  ids_.resize(2 * size_t(n));
  const char* p = b.bytes.data() + sizeof(int64_t);
  if (n > 0) {
    CUDA_CHECK(cudaMemcpyAsync(k_.data(), p, rows * sizeof(T), cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaMemcpyAsync(v_.data(), p + rows * sizeof(T), rows * sizeof(T),
                               cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaMemcpyAsync(ids_.data(), p + 2 * rows * sizeof(T),
                               2 * size_t(n) * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
    if (with_grads) {
      dkv_.resize(2 * rows);
      CUDA_CHECK(cudaMemcpyAsync(dkv_.data(), p + 2 * rows * sizeof(T) + 2 * size_t(n) * 4,
                                 2 * rows * sizeof(float), cudaMemcpyHostToDevice, stream));
    }
  }
  return FlashKv<T>{k_.data(), v_.data(), kv_dim, kv_dim, ids_.data(), ids_.data() + n, n};
}

template <class T>
void DeviceRingAttention<T>::shift(const Block& out, Block* in, int tag, size_t cap) {
  const int k = int(members_.size());
  RingShift transfer(comm_, members_[size_t((me_ + 1) % k)], members_[size_t((me_ + k - 1) % k)],
                     tag, out.bytes, cap);
  transfer.wait(&in->bytes, timeout_s_);
  std::memcpy(&in->n, in->bytes.data(), sizeof(int64_t));
}

template <class T>
void DeviceRingAttention<T>::forward(int, const FlashDims& dims, const FlashQuery<T>& q,
                                     const FlashKv<T>& kv, const FlashOut<T>& res,
                                     cudaStream_t stream) {
  const int k = int(members_.size());
  const int64_t kv_dim = int64_t(dims.n_kv_heads) * dims.head_dim;
  const int64_t qw = int64_t(dims.n_heads) * dims.head_dim;
  acc_.resize(size_t(q.n * qw));
  part_.resize(size_t(q.n * qw));
  part_lse_.resize(size_t(q.n * dims.n_heads));
  const FlashOut<float> acc{acc_.data(), qw, res.lse};
  Block cur, next;
  pack(kv, kv_dim, false, &cur, stream);
  for (int step = 0; step < k; ++step) {
    // The kernels run on the stream while the next block travels.
    if (step == 0) {
      flash_attention_forward<T, float>(dims, q, kv, acc, stream);
    } else {
      const FlashKv<T> block = upload(cur, kv_dim, false, stream);
      flash_attention_forward<T, float>(
          dims, q, block, FlashOut<float>{part_.data(), qw, part_lse_.data()}, stream);
      flash_attention_merge<float>(dims, q.n, acc, part_.data(), qw, part_lse_.data(), stream);
    }
    if (step + 1 < k) {
      shift(cur, &next, kTagForward, block_bytes(max_tokens_, kv_dim, false));
      CUDA_CHECK(cudaStreamSynchronize(stream));  // the device buffers are reused next
      std::swap(cur, next);
    }
  }
  convert_rows<float, T>(acc_.data(), qw, q.n, qw, res.out, res.ld, stream);
}

template <class T>
void DeviceRingAttention<T>::backward(int, const FlashDims& dims, const FlashQuery<T>& q,
                                      const FlashKv<T>& kv, const T* out, int64_t ldo,
                                      const float* lse, const T* dout, int64_t lddo, float* dq,
                                      int64_t lddq, const FlashKvGrad& kv_grad,
                                      cudaStream_t stream) {
  const int k = int(members_.size());
  const int64_t kv_dim = int64_t(dims.n_kv_heads) * dims.head_dim;
  delta_.resize(size_t(q.n * dims.n_heads));
  flash_attention_delta<T, T>(dims, q.n, out, ldo, dout, lddo, delta_.data(), stream);
  const FlashQueryGrad<T> g{dout, lddo, lse, delta_.data(), dq, lddq};
  Block cur, next;
  pack(kv, kv_dim, true, &cur, stream);  // own block with zeroed dK/dV travels
  for (int step = 0; step < k; ++step) {
    const FlashKv<T> block = upload(cur, kv_dim, true, stream);
    const int64_t rows = cur.n * kv_dim;
    flash_attention_backward<T>(
        dims, q, block, g, FlashKvGrad{dkv_.data(), dkv_.data() + rows, kv_dim, kv_dim}, stream);
    // Pass the block on with what this member added (k passes bring it home).
    if (cur.n > 0) {
      char* grads = cur.bytes.data() + block_bytes(cur.n, kv_dim, false);
      CUDA_CHECK(cudaMemcpyAsync(grads, dkv_.data(), 2 * size_t(rows) * sizeof(float),
                                 cudaMemcpyDeviceToHost, stream));
    }
    CUDA_CHECK(cudaStreamSynchronize(stream));
    shift(cur, &next, kTagBackward, block_bytes(max_tokens_, kv_dim, true));
    std::swap(cur, next);
  }
  // After k shifts the block in hand is this member's own, with every
  // member's contribution to its dK/dV.
  ML_CHECK(cur.n == kv.n, "ring attention: the returning block is not this member's");
  upload(cur, kv_dim, true, stream);
  const int64_t rows = cur.n * kv_dim;
  add_rows(dkv_.data(), kv_dim, cur.n, kv_dim, kv_grad.dk, kv_grad.lddk, stream);
  add_rows(dkv_.data() + rows, kv_dim, cur.n, kv_dim, kv_grad.dv, kv_grad.lddv, stream);
}

template class DeviceRingAttention<float>;
template class DeviceRingAttention<__nv_bfloat16>;

}  // namespace meshloom::kernels
