// The entry points of libmeshloom_cuda.so, the CUDA backend as a module that
// meshloom loads only where a trainer runs with run.backend: cuda.
// lib/train/cuda_module.cpp finds them by name (dlsym) and holds the only
// C++ factory, make_cuda_backend(); none of them throws across the module
// boundary.
#pragma once

#include <string>

#include "base/check.hpp"
#include "train/backend.hpp"

#define ML_MODULE_EXPORT extern "C" __attribute__((visibility("default")))

// The executable's fatal handler and this rank's identity: later errors go
// through it, since the module links its own copy of the base library, whose
// default handler would end only this rank (module.cpp).
ML_MODULE_EXPORT void meshloom_cuda_init(meshloom::FatalHandler handler, int rank,
                                         const std::string* role);

// A CudaBackend on the trainer's GPU, or null with the reason in *error
// (model/cuda_backend.cpp). Named _backend since it takes a CudaBackendSpec:
// a module of an older signature reports its entry points missing instead
// of misreading them.
ML_MODULE_EXPORT meshloom::train::TrainerBackend* meshloom_cuda_make_backend(
    const meshloom::model::Shape* shape, const meshloom::train::CudaBackendSpec* spec,
    std::string* error);

// One line: NCCL and CUDA runtime versions and the visible devices (module.cpp).
ML_MODULE_EXPORT void meshloom_cuda_summary(std::string* out);
