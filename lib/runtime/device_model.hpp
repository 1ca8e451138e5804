// The trainer's model on an accelerator: forward and backward of one
// micro-batch run there (kernels/model/gpu_transformer), while the fp32
// master weights, the gradient reduction and AdamW stay with the trainer, so
// checkpoints, ZeRO-1 and resume work unchanged. Parameters go to the device
// once per step and gradients come back once per step.
//
// make_cuda_model() loads the CUDA backend, the module libmeshloom_cuda.so
// (kernels/model/cuda_module.cpp), on first use (lib/runtime/cuda_module.cpp);
// in a CPU-only build it fails.
#pragma once

#include <mpi.h>

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/batch.hpp"
#include "model/params.hpp"
#include "model/transformer.hpp"

namespace meshloom {

// The CP group of a micro-batch that runs as a ring (as for train::RingAttention):
// members' ranks in `comm` in ring order, this rank's index, the largest block
// any member holds (the capacity), and the deadline of every transfer.
struct RingGroup {
  MPI_Comm comm = MPI_COMM_NULL;
  std::vector<int> members;
  int me = 0;
  int64_t max_tokens = 0;
  double timeout_s = 300;
};

class DeviceModel {
 public:
  virtual ~DeviceModel() = default;
  // One line for logs: the device and the precision.
  virtual std::string describe() const = 0;
  // The working copy from the fp32 master weights (ParamLayout order).
  virtual void set_params(std::span<const float> params) = 0;
  virtual void zero_grads() = 0;
  // Forward, then backward with `scale` (the CPU model's forward() and
  // backward(scale) together); gradients accumulate on the device. With a
  // ring, attention runs over the CP group (kernels/model/device_ring_attention).
  // `offload` is the plan's ratio r for the micro-batch: r·(layers − 2) layers'
  // activations wait in host memory between forward and backward.
  virtual model::LossSum forward_backward(const model::Batch& batch, double scale,
                                          const RingGroup* ring = nullptr, float offload = 0) = 0;
  // Copies the accumulated fp32 gradients into `grads` (ParamLayout order).
  virtual void download_grads(std::span<float> grads) = 0;
  // The device's dense product rate in the model's precision (FLOP/s),
  // measured once with a large cuBLAS product: the roofline of MFU.
  virtual double peak_flops() = 0;
};

// precision: "bf16" (bf16 weights and activations, fp32 accumulation) or
// "fp32". local_index: the trainer's index among its node's trainers; it runs
// on device local_index mod the visible devices. Fails (Error) with the
// reason when no GPU is visible or the build has no CUDA.
std::unique_ptr<DeviceModel> make_cuda_model(const model::Shape& shape,
                                             const std::string& precision, int local_index);

// One line: NCCL and CUDA runtime versions and the visible devices, or why
// the CUDA backend cannot be loaded ("CPU-only build" without CUDA). Loads
// the module.
std::string cuda_backend_summary();

}  // namespace meshloom
