#include "kernels/host/cudnn/sdpa_plan.hpp"

#include <algorithm>

#include "base/check.hpp"
#include "base/strings.hpp"
#include "kernels/host/cudnn/cudnn_check.hpp"

namespace meshloom::cudnn {

namespace {

// cuDNN 9.x marks the handle attributes deprecated (a device-properties
// descriptor is the newer way), but they remain the path every released
// frontend version has run on: keep them until a GPU run shows the other.
void set_handle(Descriptor& d, cudnnBackendAttributeName_t name, cudnnHandle_t handle) {
  d.set(name, handle);
}
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
constexpr cudnnBackendAttributeName_t kGraphHandle = CUDNN_ATTR_OPERATIONGRAPH_HANDLE;
constexpr cudnnBackendAttributeName_t kPlanHandle = CUDNN_ATTR_EXECUTION_PLAN_HANDLE;
#pragma GCC diagnostic pop

// The engine configurations cuDNN's heuristics rank for this graph, best first.
std::vector<Descriptor> ranked_engine_configs(const Descriptor& op_graph) {
  Descriptor heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  heur.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, op_graph)
      .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_HEUR_MODE_A)
      .finalize();
  int64_t count = 0;
  CUDNN_CHECK(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                       CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr));
  std::vector<Descriptor> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    raw.push_back(configs.back().get());
  }
  int64_t returned = 0;
  if (count > 0)
    CUDNN_CHECK(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                         CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &returned,
                                         raw.data()));
  configs.resize(size_t(std::min(returned, count)));
  return configs;
}

}  // namespace

Descriptor finalize_operation_graph(const SdpaGraph& graph, cudnnHandle_t handle) {
  Descriptor op_graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  op_graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, graph.raw_operations());
  if (handle) set_handle(op_graph, kGraphHandle, handle);
  op_graph.finalize();
  return op_graph;
}

SdpaPlan::SdpaPlan(SdpaGraph graph, cudnnHandle_t handle) : graph_(std::move(graph)) {
  op_graph_ = finalize_operation_graph(graph_, handle);
  for (Descriptor& config : ranked_engine_configs(op_graph_)) {
    ++tried_;
    Descriptor plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    set_handle(plan, kPlanHandle, handle);
    plan.set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config);
    if (plan.try_finalize() != CUDNN_STATUS_SUCCESS) continue;  // the next ranked engine
    int64_t count = 0;
    CUDNN_CHECK(cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                         CUDNN_TYPE_INT64, 1, &count, &workspace_bytes_));
    plan_ = std::move(plan);
    return;
  }
  // An answer about this shape, not a fault: the caller may run the flash
  // kernels instead.
  throw Error(strf("cuDNN: no engine runs the attention %s graph (%lld configurations tried): %s",
                   graph_.backward ? "backward" : "forward", (long long)tried_,
                   graph_.shape.describe().c_str()));
}

void SdpaPlan::execute(cudnnHandle_t handle, const Bindings& bindings, void* workspace) const {
  std::vector<int64_t> uids;
  std::vector<void*> pointers;
  for (int64_t uid : graph_.bound_uids) {
    const auto it = std::find_if(bindings.begin(), bindings.end(),
                                 [&](const auto& b) { return b.first == uid; });
    ML_CHECK(it != bindings.end() && it->second,
             strf("cuDNN attention: uid %lld unbound", (long long)uid));
    uids.push_back(uid);
    pointers.push_back(it->second);
  }
  Descriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, uids)
      .set_raw(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, int64_t(pointers.size()),
               pointers.data())
      .set_raw(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace)
      .finalize();
  CUDNN_CHECK(cudnnBackendExecute(handle, plan_.get(), pack.get()));
}

const SdpaPlan& SdpaPlanCache::get(const SdpaShape& shape, bool backward, cudnnHandle_t handle) {
  for (const auto& plan : plans_)
    if (plan->graph().backward == backward && plan->graph().shape == shape) return *plan;
  for (const auto& [refused, direction] : refused_)
    if (direction == backward && refused == shape)
      throw Error("cuDNN: no engine runs this attention graph: " + shape.describe());
  SdpaGraph graph = backward ? build_sdpa_backward_graph(shape) : build_sdpa_forward_graph(shape);
  try {
    plans_.push_back(std::make_unique<SdpaPlan>(std::move(graph), handle));
  } catch (const Error&) {
    refused_.emplace_back(shape, backward);  // heuristics are not asked twice
    throw;
  }
  return *plans_.back();
}

}  // namespace meshloom::cudnn
