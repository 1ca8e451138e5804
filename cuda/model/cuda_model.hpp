// The trainer's TrainerBackend on one GPU (cuda_model.cpp). meshloom itself
// reaches it through the module's entry points (cuda_module.cpp); tests and
// benchmarks that link meshloom_kernels may call it directly.
#pragma once

#include <memory>
#include <string>

#include "train/backend.hpp"

namespace meshloom {

// See make_cuda_backend() in lib/train/backend.hpp.
std::unique_ptr<train::TrainerBackend> make_gpu_backend(const model::Shape& shape,
                                                        const train::CudaBackendSpec& spec);

}  // namespace meshloom
