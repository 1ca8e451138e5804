// cuDNN fused-attention graphs (scaled dot-product attention) built with the
// backend API alone: the operations cuDNN's flash engines recognise, laid
// out as meshloom's flash kernels' contract
// (kernels/device/attention/flash_attention.hpp):
//
//   Q [n, H·D], K/V [n, Hkv·D] with free leading dimensions (column slices
//   of the fused QKV rows, read in place), O [n, H·D], Stats (= lse) [n, H]
//   float, token-major. Packed documents are cuDNN's ragged batch: document
//   b holds tokens [start_b, start_b + len_b), each tensor's ragged offset is
//   start_b · (its leading dimension), and SEQ_LEN_Q = SEQ_LEN_KV = len_b
//   mask the padding of the [B, H, S, S] score tile. Causal masking is
//   top-left within each document (row ≥ column). GQA: K and V have Hkv
//   heads, cuDNN broadcasts each to H/Hkv query heads.
//
// Forward: S = Q·Kᵀ·scale, padding and causal masks, softmax with Stats =
// max + log Σ exp, O = P·V. Backward (the fp32 dQ accumulator path, cuDNN
// ≥ 9.6): dQ, dK, dV in bf16 from Q, K, V, O, dO and Stats; its ragged fp32
// scratch tensors (softmax_sum = rowsum(dO∘O), dQ_accum, and for GQA the
// full-head dK/dV) live in a workspace that the caller carves
// (BackwardScratch).
//
// Building a graph creates and finalizes its tensors' and operations'
// descriptors only: no handle, no GPU. The operation graph, heuristics and
// plans come later (sdpa_plan.hpp).
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "kernels/host/cudnn/cudnn_descriptor.hpp"

namespace meshloom::cudnn {

// One graph's shape: a bucket of micro-batches that can share its plan.
struct SdpaShape {
  int64_t docs = 0;     // B: documents (the bucket's count; extra ones are empty)
  int64_t max_len = 0;  // S: the longest document the bucket allows
  int64_t heads = 0, kv_heads = 0, head_dim = 0;
  // Token strides (leading dimensions) in elements.
  int64_t ld_q = 0, ld_k = 0, ld_v = 0, ld_o = 0, ld_do = 0;
  bool causal = true;

  // Throws meshloom::Error naming what is wrong: counts not positive, D not
  // 64 or 128, heads not a multiple of kv_heads, a leading dimension shorter
  // than its heads' columns or not 16-byte aligned in bf16.
  void validate() const;
  bool operator==(const SdpaShape&) const = default;
  std::string describe() const;
};

// Unique ids of the tensors the caller binds in the variant pack.
enum SdpaUid : int64_t {
  kUidQ = 1,
  kUidK,
  kUidV,
  kUidO,
  kUidStats,
  kUidDO,
  kUidDQ,
  kUidDK,
  kUidDV,
  kUidScale,
  kUidNegInf,
  kUidOne,
  kUidSeqLenQ,
  kUidSeqLenKv,
  kUidRaggedQ,
  kUidRaggedK,
  kUidRaggedV,
  kUidRaggedO,
  kUidRaggedStats,
  kUidRaggedDO,
  kUidRaggedDQ,
  kUidRaggedDKV,
  kUidSoftmaxSum,
  kUidDQAccum,
  kUidDKFull,
  kUidDVFull,
  kUidFirstVirtual = 1000
};

// Tensors and operations of one graph, finalized; the operations point at
// the tensors, so both live here.
struct SdpaGraph {
  SdpaShape shape;
  bool backward = false;
  std::deque<Descriptor> tensors;
  std::vector<Descriptor> operations;
  std::vector<int64_t> bound_uids;  // the non-virtual tensors, in creation order

  std::vector<cudnnBackendDescriptor_t> raw_operations() const;
};

SdpaGraph build_sdpa_forward_graph(const SdpaShape& shape);
SdpaGraph build_sdpa_backward_graph(const SdpaShape& shape);

// The backward graph's scratch tensors in the caller's workspace, for
// `tokens` packed tokens: byte offsets from the start, and the total.
struct BackwardScratch {
  int64_t softmax_sum = 0, dq_accum = 0, dk_full = -1, dv_full = -1;  // -1: not used (MHA)
  int64_t bytes = 0;
};
BackwardScratch backward_scratch(const SdpaShape& shape, int64_t tokens);

}  // namespace meshloom::cudnn
