// make_cuda_model(): the trainer's DeviceModel on one GPU (see
// lib/model/device_model.hpp), a GpuTransformer in bf16 or fp32 on its own
// stream.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "base/check.hpp"
#include "base/strings.hpp"
#include "kernels/common/check.cuh"
#include "kernels/device_info.hpp"
#include "kernels/model/gpu_transformer.hpp"
#include "model/device_model.hpp"

namespace meshloom::model {

namespace {

template <class T>
class CudaModel final : public DeviceModel {
 public:
  CudaModel(const Shape& shape, int device, std::string name) : name_(std::move(name)) {
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
  LossSum forward_backward(const Batch& batch, double scale) override {
    const LossSum ls = model_->forward(batch);
    model_->backward(scale);
    return ls;
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
};

}  // namespace

std::unique_ptr<DeviceModel> make_cuda_model(const Shape& shape, const std::string& precision,
                                             int local_index) {
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

}  // namespace meshloom::model
