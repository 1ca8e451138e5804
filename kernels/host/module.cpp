// The module's entry points (module.hpp) but the backend's own, which lives
// beside CudaBackend (model/cuda_backend.cpp). Errors while making the model
// come back as text; later ones go through the executable's fatal handler.
#include "kernels/host/module.hpp"

#include <exception>
#include <string>

#include "kernels/device/device_info.hpp"

ML_MODULE_EXPORT void meshloom_cuda_init(meshloom::FatalHandler handler, int rank,
                                         const std::string* role) {
  meshloom::set_fatal_handler(handler);
  meshloom::set_process_identity(rank, *role);
}

ML_MODULE_EXPORT void meshloom_cuda_summary(std::string* out) {
  try {
    *out = meshloom::cuda::summary();
  } catch (const std::exception& e) {
    *out = std::string("CUDA backend loaded, but: ") + e.what();
  }
}
