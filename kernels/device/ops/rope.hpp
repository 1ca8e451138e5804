// Rotary position embedding on the GPU (rotate-half), the twin of the CPU's
// rope_apply in lib/model/transformer.cpp. In every row t of x, for each of
// the first `heads` heads of D = head_dim values and each i < D/2, the pair
// (x_i, x_{i+D/2}) turns by angle = pos[t] · θ^(−2i/D):
//   x_i ← x_i·cos − x_{i+D/2}·sin,   x_{i+D/2} ← x_{i+D/2}·cos + x_i·sin.
// Backward turns by the negative angle (the transpose), for the gradients.
//
// Call it on the fused token-major QKV buffer [n, ld] with heads = n_heads +
// n_kv_heads (q heads then k heads are adjacent at the start of each row; v
// is left alone), as the CPU does. pos [n] int32 per token (positions restart
// at 0 in every sample). The angles come from a per-position table, computed
// in double on the host like the CPU's and rounded to fp32 (lib/model/
// rope_angles.hpp; kernels/host/model/device_rope_table.hpp keeps it on the device);
// every pos[t] must be below its `positions`. The rotation is fp32 math.
// T = float or __nv_bfloat16. Device pointers; asynchronous on `stream`.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace meshloom::cuda {

// Device tables of cos and sin, [positions, half] each (half = head_dim / 2).
struct RopeAngles {
  const float* cos = nullptr;
  const float* sin = nullptr;
  int64_t positions = 0;
  int64_t half = 0;
};

template <class T>
void rope_forward(T* x, int64_t ld, const int32_t* pos, int64_t n, int64_t heads, int64_t head_dim,
                  const RopeAngles& angles, cudaStream_t stream);

template <class T>
void rope_backward(T* x, int64_t ld, const int32_t* pos, int64_t n, int64_t heads, int64_t head_dim,
                   const RopeAngles& angles, cudaStream_t stream);

}  // namespace meshloom::cuda
