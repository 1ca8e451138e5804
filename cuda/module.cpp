// The entry points of libmeshloom_cuda.so, the CUDA backend as a module that
// meshloom loads only where a trainer runs with run.backend: cuda (see
// lib/train/cuda_module.cpp). Errors while making the model come back as
// text; later ones go through the executable's fatal handler, which the
// module takes over when it is loaded (it links its own copy of the base
// library, whose default handler would end only this rank).
#include <exception>
#include <string>

#include "base/check.hpp"
#include "cuda/kernels/device_info.hpp"
#include "cuda/model/cuda_model.hpp"

#define ML_MODULE_EXPORT extern "C" __attribute__((visibility("default")))

ML_MODULE_EXPORT void meshloom_cuda_init(meshloom::FatalHandler handler, int rank,
                                         const std::string* role) {
  meshloom::set_fatal_handler(handler);
  meshloom::set_process_identity(rank, *role);
}

// (Named _backend since it takes a CudaBackendSpec: a module of the older
// signature reports its entry points missing instead of misreading them.)
ML_MODULE_EXPORT meshloom::train::TrainerBackend* meshloom_cuda_make_backend(
    const meshloom::model::Shape* shape, const meshloom::train::CudaBackendSpec* spec,
    std::string* error) {
  try {
    return meshloom::make_gpu_backend(*shape, *spec).release();
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
