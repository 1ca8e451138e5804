// make_gpu_device_model(): the trainer's DeviceModel on one GPU (see
// lib/runtime/device_model.hpp), a GpuTransformer in bf16 or fp32 on its own
// stream. meshloom reaches it through the module (cuda_module.cpp).
#include "kernels/model/cuda_model.hpp"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <type_traits>

#include "base/check.hpp"
#include "base/strings.hpp"
#include "kernels/blas/gemm.hpp"
#include "kernels/common/check.cuh"
#include "kernels/common/device_buffer.hpp"
#include "kernels/device_info.hpp"
#include "kernels/model/device_ring_attention.hpp"
#include "kernels/model/gpu_transformer.hpp"
#include "runtime/device_model.hpp"

namespace meshloom {

namespace {

using model::Op;

template <class T>
class CudaModel final : public DeviceModel {
 public:
  CudaModel(const model::Shape& shape, int device, std::string name) : name_(std::move(name)) {
    CUDA_CHECK(cudaSetDevice(device));
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    model_ = std::make_unique<kernels::GpuTransformer<T>>(shape, stream_);
  }
  ~CudaModel() override {
    model_.reset();
    if (stream_) cudaStreamDestroy(stream_);
  }
  std::string describe() const override { return name_; }
  void set_params(std::span<const float> params) override { model_->set_params(params); }
  void zero_grads() override { model_->zero_grads(); }
  model::LossSum forward_backward(const model::Batch& batch, double scale, const RingGroup* ring,
                                  float offload) override {
    // The planner's count (plan/plan.hpp): 2 + (1 − r)·(layers − 2) layers
    // stay resident; the store keeps the last two offloaded ones on the device.
    const int layers = int(model_->layout().shape().n_layers);
    const int offloaded =
        offload > 0 ? std::min(layers, 2 + int(std::lround(offload * double(layers - 2)))) : 0;
    std::unique_ptr<kernels::DeviceRingAttention<T>> attention;
    if (ring)
      attention = std::make_unique<kernels::DeviceRingAttention<T>>(
          ring->comm, ring->members, ring->me, ring->max_tokens, ring->timeout_s);
    const model::LossSum ls = model_->forward(batch, attention.get(), offloaded);
    model_->backward(scale);
    if (attention) CUDA_CHECK(cudaStreamSynchronize(stream_));  // `attention` ends here
    return ls;
  }
  double peak_flops() override {
    if (peak_ > 0) return peak_;
    const int64_t n = 8192;
    const kernels::Dtype t = std::is_same_v<T, float> ? kernels::Dtype::f32 : kernels::Dtype::bf16;
    kernels::DeviceBuffer<T> a(size_t(n * n)), b(size_t(n * n)), c(size_t(n * n));
    a.zero(stream_);
    b.zero(stream_);
    kernels::Blas blas(stream_);
    for (int rep = 0; rep < 4; ++rep) {  // the first warms up
      CUDA_CHECK(cudaStreamSynchronize(stream_));
      const auto t0 = std::chrono::steady_clock::now();
      blas.gemm(Op::N, Op::N, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n, t, t);
      CUDA_CHECK(cudaStreamSynchronize(stream_));
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (rep > 0) peak_ = std::max(peak_, 2.0 * double(n) * double(n) * double(n) / s);
    }
    return peak_;
  }
  void download_grads(std::span<float> grads) override {
    ML_CHECK(int64_t(grads.size()) == model_->layout().numel(), "download_grads: wrong size");
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    CUDA_CHECK(cudaMemcpy(grads.data(), model_->grads(), grads.size() * sizeof(float),
                          cudaMemcpyDeviceToHost));
  }

 private:
  std::string name_;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<kernels::GpuTransformer<T>> model_;
  double peak_ = 0;
};

}  // namespace

std::unique_ptr<DeviceModel> make_gpu_device_model(const model::Shape& shape,
                                                   const std::string& precision, int local_index) {
  std::string why;
  const int n = cuda_device_count(&why);
  if (n == 0) throw Error("run.backend: cuda, but no GPU is visible: " + why);
  const int device = local_index % n;  // more trainers than GPUs share them
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  const std::string name = strf("GPU %d (%s, sm_%d%d), %s", device, prop.name, prop.major,
                                prop.minor, precision.c_str());
  if (precision == "fp32") return std::make_unique<CudaModel<float>>(shape, device, name);
  ML_CHECK(precision == "bf16", "run.precision must be bf16 or fp32, not " + precision);
  return std::make_unique<CudaModel<__nv_bfloat16>>(shape, device, name);
}

}  // namespace meshloom
