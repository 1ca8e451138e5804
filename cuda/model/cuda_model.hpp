// The trainer's DeviceModel on one GPU (cuda_model.cpp). meshloom itself
// reaches it through the module's entry points (cuda_module.cpp); tests and
// benchmarks that link meshloom_kernels may call it directly.
#pragma once

#include <memory>
#include <string>

#include "train/device_model.hpp"

namespace meshloom {

// See make_cuda_model() in lib/train/device_model.hpp.
std::unique_ptr<DeviceModel> make_gpu_device_model(const model::Shape& shape,
                                                   const std::string& precision, int local_index);

}  // namespace meshloom
