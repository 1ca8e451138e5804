// The backward kernels' parameters, shared by the WMMA kernel
// (flash_backward.cu, every type and alignment), the register-tiled mma.sync
// kernel (flash_backward_mma.cu) and the Hopper wgmma kernel
// (flash_backward_wgmma.cu), both bf16 with 16-byte aligned rows.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/device/attention/flash_tiles.cuh"

namespace meshloom::cuda::flash {

template <class T>
struct BwdParams : QkvParams<T> {
  const T* dout;
  int64_t lddo;
  const float* lse;
  const float* delta;
  float* dq;
  int64_t lddq;
  float* dk;
  float* dv;
  int64_t lddk, lddv;
  bool vec_do;
};

// Launches the mma.sync backward for head dimension D (64 or 128). Needs
// p.vec_q, p.vec_k, p.vec_v, p.vec_do; p.q_ranges and p.k_ranges with tiles
// of kMmaBwdBQ query rows and kMmaBwdBK keys.
constexpr int kMmaBwdBQ = 64, kMmaBwdBK = 128;
void launch_backward_mma(const BwdParams<__nv_bfloat16>& p, int head_dim, cudaStream_t stream);

// The same for the wgmma backward (sm_90a: only on a compute capability 9.0
// device), with tiles of kWgmmaBwdBQ query rows and kWgmmaBwdBK keys.
constexpr int kWgmmaBwdBQ = 64, kWgmmaBwdBK = 128;
void launch_backward_wgmma(const BwdParams<__nv_bfloat16>& p, int head_dim, cudaStream_t stream);

}  // namespace meshloom::cuda::flash
