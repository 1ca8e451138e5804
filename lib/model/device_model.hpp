// The trainer's model on an accelerator: forward and backward of one
// micro-batch run there (kernels/model/gpu_transformer), while the fp32
// master weights, the gradient reduction and AdamW stay with the trainer, so
// checkpoints, ZeRO-1 and resume work unchanged. Parameters go to the device
// once per step and gradients come back once per step.
//
// make_cuda_model() is defined by the CUDA build (kernels/model/cuda_model.cpp);
// a CPU-only build defines it to fail with a clear message
// (lib/runtime/device_model_unavailable.cpp).
#pragma once

#include <memory>
#include <span>
#include <string>

#include "model/batch.hpp"
#include "model/params.hpp"
#include "model/transformer.hpp"

namespace meshloom::model {

class DeviceModel {
 public:
  virtual ~DeviceModel() = default;
  // One line for logs: the device and the precision.
  virtual std::string describe() const = 0;
  // The working copy from the fp32 master weights (ParamLayout order).
  virtual void set_params(std::span<const float> params) = 0;
  virtual void zero_grads() = 0;
  // Forward, then backward with `scale` (the CPU model's forward() and
  // backward(scale) together); gradients accumulate on the device.
  virtual LossSum forward_backward(const Batch& batch, double scale) = 0;
  // Copies the accumulated fp32 gradients into `grads` (ParamLayout order).
  virtual void download_grads(std::span<float> grads) = 0;
};

// precision: "bf16" (bf16 weights and activations, fp32 accumulation) or
// "fp32". local_index: the trainer's index among its node's trainers; it runs
// on device local_index mod the visible devices. Fails (Error) with the
// reason when no GPU is visible or the build has no CUDA.
std::unique_ptr<DeviceModel> make_cuda_model(const Shape& shape, const std::string& precision,
                                             int local_index);

}  // namespace meshloom::model
