// What the two users of cuDNN's fused attention share (CudnnDeviceAttention
// for a micro-batch's own tokens, CudnnBlockAttention for context-parallel
// blocks): one cuDNN handle, the cache of plans, the device tables of
// sequence lengths and ragged offsets, the workspace, the graphs' by-value
// scalars, and which fallback reasons were already logged.
#pragma once

#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstdint>
#include <limits>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "kernels/device/attention/flash_attention.hpp"
#include "kernels/host/cudnn/sdpa_plan.hpp"
#include "kernels/host/device_buffer.hpp"

namespace meshloom::cuda {

// The score of a masked position (the graphs' kUidNegInf): the lowest finite
// float, not −inf, so that a padding row, all of it masked, gives finite,
// unused values rather than NaN.
inline constexpr float kMaskedScore = std::numeric_limits<float>::lowest();

// The tensors of one graph call: q to lse for the forward (out and lse
// written), all of them for the backward (dq, dk, dv written).
struct SdpaTensors {
  const void *q = nullptr, *k = nullptr, *v = nullptr, *out = nullptr, *lse = nullptr;
  const void *dout = nullptr, *dq = nullptr, *dk = nullptr, *dv = nullptr;
};

class CudnnSession {
 public:
  CudnnSession();
  ~CudnnSession();
  CudnnSession(const CudnnSession&) = delete;
  CudnnSession& operator=(const CudnnSession&) = delete;

  // The head sizes the graphs take.
  static bool takes_head_dim(int head_dim) { return head_dim == 64 || head_dim == 128; }
  // The shape of a graph call over `docs` documents of at most `max_len`
  // tokens (both rounded up to their buckets), not causal.
  static cudnn::SdpaShape shape(const FlashDims& dims, int64_t docs, int64_t max_len, int64_t ld_q,
                                int64_t ld_k, int64_t ld_v, int64_t ld_o, int64_t ld_do);

  // The bindings of a graph call: the tensors, the query and key sequence
  // lengths, and the ragged offsets of q, k, v, out, lse (5: a forward) or
  // of q, k, v, out, dout, lse, dq, dk and dv (8: a backward; dk and dv
  // share theirs).
  static cudnn::SdpaPlan::Bindings bindings(const SdpaTensors& x, int32_t* seq_q, int32_t* seq_kv,
                                            std::span<int32_t* const> ragged);

  // The cached plan of `shape`, or null with the reason in *why where the
  // shape is outside the graphs or no engine takes it.
  const cudnn::SdpaPlan* plan(const cudnn::SdpaShape& shape, bool backward, std::string* why);

  // The host tables of the next call: filled by the caller, then copied to
  // the device on `stream` by upload_tables(), which returns their start.
  std::vector<int32_t>& host_tables() { return host_tables_; }
  int32_t* upload_tables(cudaStream_t stream);

  // A workspace of at least `bytes` bytes on the device.
  void* workspace(int64_t bytes);
  // The backward's workspace: the plan's own first, then the graph's fp32
  // scratch tensors, whose bindings are added to *bindings.
  void* backward_workspace(const cudnn::SdpaPlan& plan, const cudnn::BackwardScratch& scratch,
                           cudnn::SdpaPlan::Bindings* bindings);

  // Runs `plan` on `stream` with `bindings` and the by-value scalars: the
  // scale 1/sqrt(head_dim), kMaskedScore and 1.
  void execute(const cudnn::SdpaPlan& plan, cudnn::SdpaPlan::Bindings bindings, int head_dim,
               void* workspace, cudaStream_t stream);

  size_t cached_plans() const { return plans_.size(); }
  // True the first time `why` is given: the caller logs it then.
  bool first_report(const std::string& why) { return reported_.insert(why).second; }

 private:
  cudnnHandle_t handle_ = nullptr;
  cudnn::SdpaPlanCache plans_;
  std::vector<int32_t> host_tables_;
  DeviceBuffer<int32_t> tables_;
  DeviceBuffer<uint8_t> workspace_;
  std::set<std::string> reported_;
  // Host copies of the by-value scalars, read when a plan executes.
  float scale_ = 0.0f, masked_score_ = kMaskedScore, one_ = 1.0f;
};

}  // namespace meshloom::cuda
