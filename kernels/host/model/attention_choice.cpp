#include "kernels/host/model/attention_choice.hpp"

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <type_traits>

#include "base/check.hpp"
#include "base/log.hpp"
#include "base/strings.hpp"
#include "kernels/device/common/check.cuh"
#ifdef MESHLOOM_HAVE_CUDNN
#include <cudnn.h>

#include "kernels/host/model/cudnn_device_attention.hpp"
#endif

namespace meshloom::cuda {

namespace {

#ifdef MESHLOOM_HAVE_CUDNN
bool device_is_sm90(std::string* why) {
  int device = 0, major = 0, minor = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();  // clear it: no GPU is an answer here, not an error
    *why = "no CUDA device";
    return false;
  }
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  if (major == 9 && minor == 0) return true;
  *why = strf("the GPU is compute capability %d.%d, not 9.0 (Hopper)", major, minor);
  return false;
}
#endif

AttentionImpl decide(std::string* why) {
  const char* env = std::getenv("MESHLOOM_ATTENTION");
  const std::string asked = env && *env ? env : "auto";
  if (asked == "flash") {
    *why = "MESHLOOM_ATTENTION=flash";
    return AttentionImpl::flash;
  }
  if (asked != "cudnn" && asked != "auto")
    throw Error(strf("MESHLOOM_ATTENTION=%s: expected cudnn, flash or auto", asked.c_str()));
  std::string unavailable;
  if (cudnn_attention_available(&unavailable)) {
    *why = "MESHLOOM_ATTENTION=" + asked +
           ": cuDNN on an sm_90 GPU, local and context-parallel (ring steps, Ulysses/hybrid "
           "forward); the flash kernels where cuDNN cannot take a block";
    return AttentionImpl::cudnn;
  }
  if (asked == "cudnn")
    throw Error("MESHLOOM_ATTENTION=cudnn, but cuDNN attention cannot run: " + unavailable +
                " (MESHLOOM_ATTENTION=flash runs the flash kernels)");
  *why = "auto: " + unavailable + ", so the flash kernels";
  return AttentionImpl::flash;
}

}  // namespace

bool cudnn_attention_available(std::string* why) {
#ifndef MESHLOOM_HAVE_CUDNN
  *why = "meshloom was built without cuDNN";
  return false;
#else
  if (cudnnGetVersion() < 90000) {
    *why = strf("cuDNN %zu is older than 9.0", cudnnGetVersion());
    return false;
  }
  // The dispatcher library loads its sub-libraries on first use: a missing
  // one shows here rather than in the middle of a step.
  cudnnBackendDescriptor_t probe = nullptr;
  if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, &probe) !=
      CUDNN_STATUS_SUCCESS) {
    *why = "cuDNN's graph library does not load";
    return false;
  }
  cudnnBackendDestroyDescriptor(probe);
  return device_is_sm90(why);
#endif
}

AttentionImpl chosen_attention(std::string* why) {
  static std::string reason;
  static const AttentionImpl impl = [] {
    const AttentionImpl chosen = decide(&reason);
    LOG_INFO("attention: %s (%s)", chosen == AttentionImpl::cudnn ? "cuDNN" : "flash kernels",
             reason.c_str());
    return chosen;
  }();
  if (why) *why = reason;
  return impl;
}

template <class T>
std::unique_ptr<DeviceAttention<T>> make_local_device_attention() {
#ifdef MESHLOOM_HAVE_CUDNN
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    if (chosen_attention() == AttentionImpl::cudnn) return std::make_unique<CudnnDeviceAttention>();
  }
#endif
  return std::make_unique<LocalDeviceAttention<T>>();
}

template std::unique_ptr<DeviceAttention<float>> make_local_device_attention<float>();
template std::unique_ptr<DeviceAttention<__nv_bfloat16>>
make_local_device_attention<__nv_bfloat16>();

}  // namespace meshloom::cuda
