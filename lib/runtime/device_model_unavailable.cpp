// make_cuda_model() for a build without the CUDA backend. Not reached in a
// normal run: make_layout() refuses run.backend: cuda on rank 0 first, with the
// reason and the fix.
#include "base/check.hpp"
#include "runtime/device_model.hpp"

#ifndef MESHLOOM_HAVE_CUDA
namespace meshloom {

std::unique_ptr<DeviceModel> make_cuda_model(const model::Shape&, const std::string&, int) {
  throw Error("run.backend: cuda, but this meshloom was built without the CUDA backend");
}

}  // namespace meshloom
#endif
