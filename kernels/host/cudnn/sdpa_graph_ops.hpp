// The building blocks of the attention graphs (sdpa_graph.hpp): tensors and
// the backend operations (matmul, pointwise, reduction, reshape), each
// created, set and finalized at once, kept in the graph being built.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/host/cudnn/sdpa_graph.hpp"

namespace meshloom::cudnn {

using Dims = std::vector<int64_t>;

// [B, H, S, D]-style strides of a token-major tensor with `ld` elements per
// token and heads `head_stride` apart.
Dims token_major_strides(int64_t max_len, int64_t ld, int64_t head_stride);

class GraphOps {
 public:
  explicit GraphOps(SdpaGraph& graph) : g_(graph) {}

  // A tensor the caller binds (uid), optionally ragged over the batch.
  const Descriptor& bound(int64_t uid, cudnnDataType_t type, const Dims& dims, const Dims& strides,
                          const Descriptor* ragged = nullptr);
  // A host scalar passed by value (scale, −inf, 1).
  const Descriptor& scalar(int64_t uid);
  // A [B + 1] int32 ragged-offset tensor or a [B] int32 sequence-length tensor.
  const Descriptor& batch_index(int64_t uid, int64_t count);
  // An intermediate that never leaves cuDNN.
  const Descriptor& virtual_tensor(cudnnDataType_t type, const Dims& dims, const Dims& strides,
                                   const Descriptor* ragged = nullptr);

  // y = x ∘ b (or ∘ with t for BINARY_SELECT: y = t ? x : b); `axis` only for
  // GEN_INDEX.
  void pointwise(cudnnPointwiseMode_t mode, cudnnDataType_t precision, const Descriptor& x,
                 const Descriptor* b, const Descriptor& y, const Descriptor* t = nullptr,
                 int64_t axis = -1);
  // c = a·b over the last two dimensions; the overrides are the per-document
  // lengths (m rows, n columns, k inner) cuDNN clips each product to.
  struct Overrides {
    const Descriptor* m = nullptr;
    const Descriptor* n = nullptr;
    const Descriptor* k = nullptr;
  };
  void matmul(const Descriptor& a, const Descriptor& b, const Descriptor& c, Overrides overrides,
              bool zero_padding = false);
  void reduction(cudnnReduceTensorOp_t op, const Descriptor& x, const Descriptor& y);
  void reshape(const Descriptor& x, const Descriptor& y);

  // The masks of the score tile s [B, H, S, S] (float), as new virtual
  // tensors: rows and columns past the document's length, then keys after
  // the query (causal). Returns the masked scores.
  const Descriptor& padding_mask(const Descriptor& s, const Dims& dims, const Dims& strides,
                                 const Descriptor& seq_q, const Descriptor& seq_kv,
                                 const Descriptor& neg_inf);
  const Descriptor& causal_mask(const Descriptor& s, const Dims& dims, const Dims& strides,
                                const Descriptor& neg_inf);

 private:
  Descriptor& new_tensor(int64_t uid, cudnnDataType_t type, const Dims& dims, const Dims& strides);
  SdpaGraph& g_;
  int64_t next_virtual_ = kUidFirstVirtual;
};

}  // namespace meshloom::cudnn
