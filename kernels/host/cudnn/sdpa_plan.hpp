// What needs a cuDNN handle (a GPU): the operation graph of an SdpaGraph,
// cuDNN's heuristics (mode A) and the first engine configuration that
// finalizes into an execution plan; then executing it with a variant pack.
// SdpaPlanCache keeps one plan per shape bucket and direction.
// Compiled and linked here; built and run only on a GPU so far.
#pragma once

#include <cudnn.h>

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "kernels/host/cudnn/sdpa_graph.hpp"

namespace meshloom::cudnn {

// The operation graph of `graph`'s operations, finalized. `handle` may be
// null where the cuDNN in use finalizes graphs without one.
Descriptor finalize_operation_graph(const SdpaGraph& graph, cudnnHandle_t handle);

class SdpaPlan {
 public:
  // Throws meshloom::Error where no engine takes the graph; other cuDNN
  // failures fail through CUDNN_CHECK.
  SdpaPlan(SdpaGraph graph, cudnnHandle_t handle);
  const SdpaGraph& graph() const { return graph_; }
  int64_t workspace_bytes() const { return workspace_bytes_; }
  int64_t engine_configs_tried() const { return tried_; }

  // One device (or, for the by-value scalars, host) pointer per bound uid;
  // every bound uid of the graph must be there. Asynchronous on the handle's
  // stream.
  using Bindings = std::vector<std::pair<int64_t, void*>>;
  void execute(cudnnHandle_t handle, const Bindings& bindings, void* workspace) const;

 private:
  SdpaGraph graph_;
  Descriptor op_graph_, plan_;
  int64_t workspace_bytes_ = 0, tried_ = 0;
};

class SdpaPlanCache {
 public:
  // The plan of this shape and direction, built on first use (throws as
  // SdpaPlan does; a shape no engine takes is remembered and refused again).
  const SdpaPlan& get(const SdpaShape& shape, bool backward, cudnnHandle_t handle);
  size_t size() const { return plans_.size(); }

 private:
  std::vector<std::unique_ptr<SdpaPlan>> plans_;
  std::vector<std::pair<SdpaShape, bool>> refused_;
};

}  // namespace meshloom::cudnn
