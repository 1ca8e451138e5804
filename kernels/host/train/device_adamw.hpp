// The optimizer's state on the GPU, the twin of train::AdamW
// (lib/train/optimizer.hpp): the fp32 master weights (the whole buffer, in
// ParamLayout order), the AdamW moments and weight-decay mask of the slice
// [begin, end) this trainer owns (all of it without ZeRO-1), and the step
// count. Updates run the fused kernel of kernels/device/ops/adamw.hpp on the
// caller's stream, so nothing crosses to the host during a step.
//
//   DeviceAdamW opt(layout.numel(), padded, begin, end, hyper, layout.decay_ranges(), stream);
//   opt.load(master_host, {}, {}, 0);        // fresh moments
//   ... backward, reduction ...
//   opt.update(grads, lr, clip_scale);        // master[begin, end) updated
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "kernels/device/ops/adamw.hpp"
#include "kernels/host/device_buffer.hpp"

namespace meshloom::cuda {

class DeviceAdamW {
 public:
  // `padded` (>= numel) sizes the master buffer: ZeRO-1 all-gathers equal
  // shards into it. `decay`: [first, last) ranges of the flat buffer.
  DeviceAdamW(int64_t numel, int64_t padded, int64_t begin, int64_t end, const AdamWHyper& hyper,
              const std::vector<std::pair<int64_t, int64_t>>& decay, cudaStream_t stream);

  // Master weights (numel) and the slice's moments (end - begin each; empty
  // spans: zeros) from the host; `step` is the count of updates done.
  void load(std::span<const float> master, std::span<const float> m, std::span<const float> v,
            int64_t step);
  // One AdamW step on [begin, end): grads is the whole reduced fp32 gradient
  // buffer on the device, multiplied by grad_scale (clipping) on the fly.
  // weights_bf16 (the whole bf16 working copy, or null) gets [begin, end) of
  // the updated weights in the same pass.
  void update(const float* grads, double lr, double grad_scale,
              __nv_bfloat16* weights_bf16 = nullptr);

  void download_master(std::span<float> out) const;                     // numel
  void download_moments(std::span<float> m, std::span<float> v) const;  // end - begin each

  float* master() { return master_.data(); }
  const float* master() const { return master_.data(); }
  int64_t numel() const { return numel_; }
  int64_t begin() const { return begin_; }
  int64_t end() const { return end_; }
  int64_t step() const { return step_; }

 private:
  int64_t numel_, begin_, end_;
  AdamWHyper hyper_;
  cudaStream_t stream_;
  DeviceBuffer<float> master_, m_, v_;
  DeviceBuffer<uint8_t> decay_;
  int64_t step_ = 0;
};

}  // namespace meshloom::cuda
