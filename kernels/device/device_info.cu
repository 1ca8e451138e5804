#include "base/strings.hpp"
#include "kernels/device/common/check.cuh"
#include "kernels/device/device_info.hpp"

namespace meshloom::cuda {

int device_count(std::string* why) {
  int n = 0;
  cudaError_t rc = cudaGetDeviceCount(&n);
  if (rc != cudaSuccess) {
    if (why) *why = cudaGetErrorString(rc);
    cudaGetLastError();  // clear the sticky error so later queries are not poisoned
    return 0;
  }
  return n;
}

std::string summary() {
  int nccl = 0;
  ncclGetVersion(&nccl);
  int runtime = 0;
  cudaRuntimeGetVersion(&runtime);
  std::string out = strf("NCCL %d.%d.%d, CUDA runtime %d.%d", nccl / 10000, (nccl / 100) % 100,
                         nccl % 100, runtime / 1000, (runtime % 1000) / 10);
  std::string why;
  int n = device_count(&why);
  if (n == 0) return out + ", no device (" + why + ")";
  out += strf(", %d device(s)", n);
  for (int d = 0; d < n; ++d) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, d) == cudaSuccess)
      out += strf("%s %s (sm_%d%d)", d ? "," : ":", prop.name, prop.major, prop.minor);
  }
  return out;
}

}  // namespace meshloom::cuda
