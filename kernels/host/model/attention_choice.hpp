// Which implementation runs attention, chosen at run time without a rebuild:
//   MESHLOOM_ATTENTION=flash   the hand-written flash kernels
//                      cudnn   cuDNN's fused attention (CudnnDeviceAttention);
//                              an Error where cuDNN is not built in, does not
//                              load, or the GPU is not an sm_90
//                      auto    (or unset) cudnn on an sm_90 GPU where cuDNN ≥ 9
//                              loads, else flash
// fp32 always runs the flash kernels (cuDNN's path is bf16). With cudnn,
// context-parallel rings run cuDNN per ring step, Ulysses and hybrid their
// gathered forward (DeviceRingAttention, DeviceUlyssesAttention); what cuDNN
// cannot take falls back to the flash kernels with a log line per reason.
// flash is exactly the flash kernels everywhere, as before cuDNN.
#pragma once

#include <memory>
#include <string>
#include <type_traits>

#include "kernels/host/model/device_attention.hpp"

namespace meshloom::cuda {

enum class AttentionImpl { flash, cudnn };

// The choice for this process (read once; `why` says what decided it).
AttentionImpl chosen_attention(std::string* why = nullptr);

// The choice for attention in T: fp32 runs the flash kernels without asking
// (so MESHLOOM_ATTENTION=cudnn does not stop an fp32 run on another GPU).
template <class T>
AttentionImpl attention_for() {
  if constexpr (std::is_same_v<T, float>) {
    return AttentionImpl::flash;
  } else {
    return chosen_attention();
  }
}

// Whether cuDNN's attention can run here, and if not, why.
bool cudnn_attention_available(std::string* why);

template <class T>
std::unique_ptr<DeviceAttention<T>> make_local_device_attention();

}  // namespace meshloom::cuda
