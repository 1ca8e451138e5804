// DeviceAttention on cuDNN's fused attention (kernels/host/cudnn/), for a
// micro-batch's own tokens (no context parallelism), bf16. Per call it reads
// the tokens' sample ids and positions back to the host, maps them to
// packed documents and runs the cached plan of their shape bucket. Where the
// mask is not documents counting from 0, or the shape is outside what the
// graphs take, or where no cuDNN engine takes the graph, it runs the flash
// kernels instead and says so once per reason.
//
// Backward writes cuDNN's bf16 dQ, dK, dV to scratch and adds them to the
// model's fp32 accumulators (the DeviceAttention contract is +=).
//
// Compiled here; never run on a GPU yet (cudnn_attention_gpu_test is the check).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/host/cudnn/sdpa_documents.hpp"
#include "kernels/host/cudnn/sdpa_plan.hpp"
#include "kernels/host/device_buffer.hpp"
#include "kernels/host/model/cudnn_session.hpp"
#include "kernels/host/model/device_attention.hpp"

namespace meshloom::cuda {

class CudnnDeviceAttention final : public DeviceAttention<__nv_bfloat16> {
 public:
  using T = __nv_bfloat16;
  CudnnDeviceAttention() = default;

  void forward(int layer, const FlashDims& dims, const FlashQuery<T>& q, const FlashKv<T>& kv,
               const FlashOut<T>& res, cudaStream_t stream) override;
  void backward(int layer, const FlashDims& dims, const FlashQuery<T>& q, const FlashKv<T>& kv,
                const T* out, int64_t ldo, const float* lse, const T* dout, int64_t lddo, float* dq,
                int64_t lddq, const FlashKvGrad& kv_grad, cudaStream_t stream) override;

  // How many calls ran on cuDNN and on the flash fallback (tests, logs).
  int64_t cudnn_calls() const { return cudnn_calls_; }
  int64_t fallback_calls() const { return fallback_calls_; }
  size_t cached_plans() const { return session_.cached_plans(); }

 private:
  // The documents of q's tokens, or nullopt (after logging why, once).
  std::optional<cudnn::PackedDocuments> documents(const FlashDims& dims, const FlashQuery<T>& q,
                                                  const FlashKv<T>& kv, cudaStream_t stream);
  // Uploads the sequence lengths and one ragged-offset table per leading
  // dimension (in `lds` order) and returns their device pointers: the
  // lengths first.
  std::vector<int32_t*> upload_tables(const cudnn::PackedDocuments& docs, int64_t bucket,
                                      const std::vector<int64_t>& lds, cudaStream_t stream);
  // The cached plan, or null where the shape is refused or no engine takes
  // it (logged once; the caller runs the flash kernels).
  const cudnn::SdpaPlan* plan_for(const cudnn::SdpaShape& shape, bool backward);
  void fall_back(const std::string& why);

  CudnnSession session_;
  LocalDeviceAttention<T> flash_;
  DeviceBuffer<T> dq_, dk_, dv_;
  std::vector<int32_t> host_sample_, host_pos_;
  int64_t cudnn_calls_ = 0, fallback_calls_ = 0;
};

}  // namespace meshloom::cuda
