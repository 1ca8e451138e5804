// How the GPU model computes attention over one micro-batch: the twin of
// model::AttentionBackend (lib/model/attention.hpp). LocalDeviceAttention
// runs the flash kernels over the micro-batch's own K/V; a context-parallel
// trainer substitutes a ring over its CP group (K/V blocks over NCCL, partial
// results merged with flash_attention_merge), Ulysses or hybrid attention
// (device_ulysses_attention.hpp), with the same contract.
#pragma once

#include "kernels/device/attention/flash_attention.hpp"
#include "kernels/host/device_buffer.hpp"

namespace meshloom::cuda {

template <class T>
class DeviceAttention {
 public:
  virtual ~DeviceAttention() = default;
  // Writes res.out and res.lse for the queries over every key they may see
  // (`kv` is this micro-batch's own K/V).
  virtual void forward(int layer, const FlashDims& dims, const FlashQuery<T>& q,
                       const FlashKv<T>& kv, const FlashOut<T>& res, cudaStream_t stream) = 0;
  // Given forward's out/lse and dout, accumulates dq and the local dk, dv
  // (the model zeroes them first). Every gradient of the local K/V, also from
  // other ranks' queries, must be in kv_grad when the stream reaches the end.
  virtual void backward(int layer, const FlashDims& dims, const FlashQuery<T>& q,
                        const FlashKv<T>& kv, const T* out, int64_t ldo, const float* lse,
                        const T* dout, int64_t lddo, float* dq, int64_t lddq,
                        const FlashKvGrad& kv_grad, cudaStream_t stream) = 0;
};

template <class T>
class LocalDeviceAttention final : public DeviceAttention<T> {
 public:
  void forward(int, const FlashDims& dims, const FlashQuery<T>& q, const FlashKv<T>& kv,
               const FlashOut<T>& res, cudaStream_t stream) override {
    flash_attention_forward<T, T>(dims, q, kv, res, stream);
  }
  void backward(int, const FlashDims& dims, const FlashQuery<T>& q, const FlashKv<T>& kv,
                const T* out, int64_t ldo, const float* lse, const T* dout, int64_t lddo, float* dq,
                int64_t lddq, const FlashKvGrad& kv_grad, cudaStream_t stream) override {
    delta_.resize(size_t(q.n * dims.n_heads));
    flash_attention_delta<T, T>(dims, q.n, out, ldo, dout, lddo, delta_.data(), stream);
    flash_attention_backward<T>(
        dims, q, kv, FlashQueryGrad<T>{dout, lddo, lse, delta_.data(), dq, lddq}, kv_grad, stream);
  }

 private:
  DeviceBuffer<float> delta_;
};

}  // namespace meshloom::cuda
