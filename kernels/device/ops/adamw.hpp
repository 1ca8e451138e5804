// The optimizer on the GPU: the twin of train::AdamW::update and the gradient
// norm of the trainer (lib/train/optimizer.cpp, lib/train/trainer.cpp).
//
// adamw_update, for element i (t = the step number after incrementing, from 1;
// lr from train::learning_rate, supplied by the caller):
//   g  = grads[i]·grad_scale
//   m  = β1·m + (1−β1)·g;   v = β2·v + (1−β2)·g·g
//   u  = (m·c1) / (sqrt(v·c2) + eps),  c1 = 1/(1−β1^t), c2 = 1/(1−β2^t)
//   p −= lr·(u + (decay[i] ? wd·p : 0))
// in fp32 with the CPU's order of operations and no fused multiply-adds, so
// the fp32 result is the CPU's up to the rounding of sqrt and division (both
// correctly rounded on either side). Weight decay applies where decay[i] ≠ 0:
// the matrices (ParamLayout::decay_ranges), never the norm gains; build the
// mask with adamw_decay_mask. The bf16 copy for the forward pass is written
// from the updated master weights (round to nearest even) when not null.
//
// Clipping, as the trainer: the norm is taken before clipping,
// grad_scale = train::clip_scale(sqrt(Σ g²), clip). grad_sum_squares gives
// Σ g² in double (fixed-order two-stage reduction: bit-identical run to run;
// ZeRO ranks all-reduce it), and clip_scale_device turns it into the scale on
// the device, for adamw_update's device_grad_scale (no host round trip).
//
// All pointers are device pointers except the mask helper's; asynchronous on
// `stream`.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <utility>
#include <vector>

namespace meshloom::cuda {

// The AdamW constants of config::OptimConfig (kept here so the kernels do not
// depend on the config library).
struct AdamWHyper {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
};

// One byte per element of [begin, end) of the flat buffer: 1 inside one of
// the `decay` [first, last) ranges, else 0 (as the CPU AdamW builds it).
std::vector<uint8_t> adamw_decay_mask(int64_t begin, int64_t end,
                                      const std::vector<std::pair<int64_t, int64_t>>& decay);

// Updates master, m, v [n] in place from grads [n]; decay [n] may be null (no
// decay anywhere); weights_bf16 [n] may be null. `step` is t ≥ 1. The grad
// scale is *device_grad_scale when that is not null, else grad_scale.
void adamw_update(float* master, float* m, float* v, const float* grads, const uint8_t* decay,
                  int64_t n, int64_t step, double lr, double grad_scale,
                  const float* device_grad_scale, const AdamWHyper& hyper,
                  __nv_bfloat16* weights_bf16, cudaStream_t stream);

// *sum_sq = Σ grads[i]² (double accumulation, fixed order). Uses a small
// stream-ordered scratch.
void grad_sum_squares(const float* grads, int64_t n, double* sum_sq, cudaStream_t stream);

// *scale = float(clip_scale(sqrt(*sum_sq), clip)): 1 when clip ≤ 0 or the norm
// is at most clip, else clip / (norm + 1e-6). Also *norm = sqrt(*sum_sq) when
// norm is not null.
void clip_scale_device(const double* sum_sq, double clip, float* scale, double* norm,
                       cudaStream_t stream);

}  // namespace meshloom::cuda
