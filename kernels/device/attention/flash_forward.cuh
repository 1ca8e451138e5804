// The forward kernels' parameters, shared by the WMMA kernel
// (flash_forward.cu, every type and alignment), the register-tiled mma.sync
// kernel (flash_forward_mma.cu) and the Hopper wgmma kernel
// (flash_forward_wgmma.cu), both bf16 with 16-byte aligned rows.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/device/attention/flash_tiles.cuh"

namespace meshloom::cuda::flash {

template <class T, class TO>
struct FwdParams : QkvParams<T> {
  TO* out;
  int64_t ldo;
  float* lse;
};

// Launches the mma.sync forward for head dimension D (64 or 128). Needs
// p.vec_q, p.vec_k, p.vec_v; p.q_ranges and p.k_ranges with tiles of
// kMmaBQ query rows and kMmaBK keys.
constexpr int kMmaBQ = 128, kMmaBK = 64;
template <class TO>
void launch_forward_mma(const FwdParams<__nv_bfloat16, TO>& p, int head_dim, cudaStream_t stream);

// The same for the wgmma forward (sm_90a: only on a compute capability 9.0
// device), with tiles of kWgmmaBQ query rows and kWgmmaBK keys.
constexpr int kWgmmaBQ = 128, kWgmmaBK = 128;
template <class TO>
void launch_forward_wgmma(const FwdParams<__nv_bfloat16, TO>& p, int head_dim, cudaStream_t stream);

}  // namespace meshloom::cuda::flash
