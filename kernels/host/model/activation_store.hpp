// What the GPU model keeps from forward for backward, per layer, and
// selective offloading (ByteScale): for a micro-batch with `offloaded` > 0,
// its first `offloaded` layers share two device slots; a layer's activations
// go to pinned host memory on a copy stream as soon as forward is done with
// them (while the next layers compute) and come back, two layers ahead, during
// backward. The last two of those layers never leave the device, so the
// device holds (layers − offloaded + 2) layers' activations instead of all.
// The planner counts the same way: a piece with offload ratio r keeps
// 2 + (1 − r)·(layers − 2) layers resident (plan/plan.hpp).
//
// The model calls, on its compute stream:
//   forward:  begin(n, offloaded); claim(0); embedding → [0].x;
//             for each layer l: layer l writes [l]; claim(l + 1); layer l writes
//             [l+1].x; saved(l)   (claiming late lets layer l − 1's copy to the
//             host overlap layer l's compute)
//   backward: for l from the last: need(l); layer l's backward reads [l]; done(l)
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "kernels/host/device_buffer.hpp"
#include "model/params.hpp"

namespace meshloom::cuda {

// One layer's saved activations (n rows each): the layer input, both
// normalized inputs and 1/rms, q|k|v after RoPE, the attention output and its
// log-sum-exp, the residual after attention, the SwiGLU input [a | b].
template <class T>
struct LayerActs {
  DeviceBuffer<T> x, xn1, qkv, o, h, xn2, ab;
  DeviceBuffer<float> rstd1, lse, rstd2;
};

template <class T>
class ActivationStore {
 public:
  // A tensor-parallel rank keeps its heads' and FFN columns' share (`shard`);
  // a pipeline stage its `layers` (numbered from 0 here; -1: all of them).
  ActivationStore(const model::Shape& shape, model::TpShard shard, cudaStream_t compute,
                  int64_t layers = -1);
  ~ActivationStore();
  ActivationStore(const ActivationStore&) = delete;
  ActivationStore& operator=(const ActivationStore&) = delete;

  // A micro-batch of n tokens; its first `offloaded` layers (clamped to the
  // layer count) live in the two slots.
  void begin(int64_t n, int offloaded);
  LayerActs<T>& operator[](int64_t layer);
  // Forward: before anything writes layer l's buffers.
  void claim(int64_t layer);
  // Forward: layer l's activations are complete.
  void saved(int64_t layer);
  // Backward: before layer l's backward reads them.
  void need(int64_t layer);
  // Backward: layer l's backward is done with them.
  void done(int64_t layer);
  // Pipeline stages (nothing offloaded): swaps the layers' activations with
  // `other`'s (one set per micro-batch between its forward and backward).
  void swap_resident(std::vector<LayerActs<T>>& other);

 private:
  struct Field {
    void* device;
    size_t bytes;
  };
  std::vector<Field> fields(LayerActs<T>& a) const;
  void resize(LayerActs<T>& a) const;
  bool travels(int64_t layer) const { return layer < offloaded_ - 2; }

  model::Shape shape_;
  model::ShardSizes my_;  // this rank's heads and FFN columns
  int64_t layers_;
  cudaStream_t compute_, copy_ = nullptr;
  int64_t n_ = 0;
  int offloaded_ = 0;
  std::vector<LayerActs<T>> resident_;
  LayerActs<T> slots_[2];
  std::vector<char*> host_;  // pinned, per layer that travels
  std::vector<size_t> host_bytes_;
  std::vector<cudaEvent_t> stored_, fetched_;  // per layer: on the host / back on the device
  cudaEvent_t mark_ = nullptr;                 // "the compute stream got here"
};

}  // namespace meshloom::cuda
