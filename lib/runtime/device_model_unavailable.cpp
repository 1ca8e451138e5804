// make_cuda_model() for a build without the CUDA backend: run.backend: cuda
// is refused with the reason and the fix.
#include "base/check.hpp"
#include "model/device_model.hpp"

#ifndef MESHLOOM_HAVE_CUDA
namespace meshloom::model {

std::unique_ptr<DeviceModel> make_cuda_model(const Shape&, const std::string&, int) {
  throw Error(
      "run.backend: cuda, but this meshloom was built without the CUDA backend (nvcc and NCCL "
      "were not found when it was configured): rebuild on a machine with the CUDA toolkit, or "
      "set run.backend: cpu");
}

}  // namespace meshloom::model
#endif
