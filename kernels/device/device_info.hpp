// What the CUDA build can see: device count and names, runtime and NCCL
// versions. Never fails: on a machine without a GPU it says why.
#pragma once

#include <string>

namespace meshloom::cuda {

// Number of visible CUDA devices; 0 (with the reason in *why) when none.
int device_count(std::string* why);
// One line for people: "NCCL 2.28.x, CUDA runtime 13.0, 1 device: NVIDIA H100 (sm_90)".
std::string summary();

}  // namespace meshloom::cuda
