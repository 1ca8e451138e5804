// The entry points of libmeshloom_cuda.so, the CUDA backend as a module that
// meshloom loads only where a trainer runs with run.backend: cuda (see
// lib/runtime/cuda_module.cpp). Errors come back as text: no exception
// crosses the module boundary.
#include <exception>
#include <string>

#include "kernels/device_info.hpp"
#include "kernels/model/cuda_model.hpp"

#define ML_MODULE_EXPORT extern "C" __attribute__((visibility("default")))

ML_MODULE_EXPORT meshloom::DeviceModel* meshloom_cuda_make_model(
    const meshloom::model::Shape* shape, const char* precision, int local_index,
    std::string* error) {
  try {
    return meshloom::make_gpu_device_model(*shape, precision, local_index).release();
  } catch (const std::exception& e) {
    *error = e.what();
  } catch (...) {
    *error = "the CUDA backend failed with an unknown error";
  }
  return nullptr;
}

ML_MODULE_EXPORT void meshloom_cuda_summary(std::string* out) {
  try {
    *out = meshloom::cuda_summary();
  } catch (const std::exception& e) {
    *out = std::string("CUDA backend loaded, but: ") + e.what();
  }
}
