#include "kernels/host/model/cudnn_device_attention.hpp"

#include <cmath>
#include <limits>
#include <span>

#include "base/check.hpp"
#include "base/log.hpp"
#include "kernels/device/common/check.cuh"
#include "kernels/device/model/cast.hpp"
#include "kernels/host/cudnn/cudnn_check.hpp"

namespace meshloom::cuda {

using cudnn::PackedDocuments;
using cudnn::SdpaShape;

CudnnDeviceAttention::CudnnDeviceAttention() {
  CUDNN_CHECK(cudnnCreate(&handle_));
  // Masked scores: the lowest finite float, so that the padding rows of a
  // document (all masked) give finite, unused values rather than NaN.
  neg_inf_ = std::numeric_limits<float>::lowest();
}

CudnnDeviceAttention::~CudnnDeviceAttention() {
  if (handle_) cudnnDestroy(handle_);
}

void CudnnDeviceAttention::fall_back(const std::string& why) {
  ++fallback_calls_;
  if (reported_.insert(why).second)
    LOG_WARN("cuDNN attention: %s; the flash kernels run these calls", why.c_str());
}

std::optional<PackedDocuments> CudnnDeviceAttention::documents(const FlashDims& dims,
                                                               const FlashQuery<T>& q,
                                                               const FlashKv<T>& kv,
                                                               cudaStream_t stream) {
  if (kv.n != q.n || kv.sample != q.sample || kv.pos != q.pos) {
    fall_back("queries and keys are different token sets (not the local case)");
    return std::nullopt;
  }
  if (dims.head_dim != 64 && dims.head_dim != 128) {
    fall_back("head_dim is neither 64 nor 128");
    return std::nullopt;
  }
  // A synchronizing read per call: simple and right for any caller; the
  // model could hand its host copy instead (left for later).
  host_sample_.resize(size_t(q.n));
  host_pos_.resize(size_t(q.n));
  download_sync(std::span<int32_t>(host_sample_), q.sample, stream);
  download_sync(std::span<int32_t>(host_pos_), q.pos, stream);
  std::string why;
  std::optional<PackedDocuments> docs = cudnn::packed_documents(host_sample_, host_pos_, &why);
  if (!docs) fall_back("the mask is not packed documents (" + why + ")");
  return docs;
}

SdpaShape CudnnDeviceAttention::shape_of(const FlashDims& dims, const PackedDocuments& docs,
                                         int64_t ld_q, int64_t ld_k, int64_t ld_v, int64_t ld_o,
                                         int64_t ld_do) const {
  SdpaShape s;
  s.docs = cudnn::bucket_docs(docs.count());
  s.max_len = cudnn::bucket_len(docs.max_len);
  s.heads = dims.n_heads;
  s.kv_heads = dims.n_kv_heads;
  s.head_dim = dims.head_dim;
  s.ld_q = ld_q;
  s.ld_k = ld_k;
  s.ld_v = ld_v;
  s.ld_o = ld_o;
  s.ld_do = ld_do;
  return s;
}

std::vector<int32_t*> CudnnDeviceAttention::upload_tables(const PackedDocuments& docs,
                                                          int64_t bucket,
                                                          const std::vector<int64_t>& lds,
                                                          cudaStream_t stream) {
  host_tables_ = cudnn::sequence_lengths(docs, bucket);
  for (int64_t ld : lds) {
    const std::vector<int32_t> offsets = cudnn::ragged_offsets(docs, bucket, ld);
    host_tables_.insert(host_tables_.end(), offsets.begin(), offsets.end());
  }
  tables_.resize(host_tables_.size());
  // Pageable source: the copy is staged before the call returns, so
  // host_tables_ may change afterwards.
  CUDA_CHECK(cudaMemcpyAsync(tables_.data(), host_tables_.data(),
                             host_tables_.size() * sizeof(int32_t), cudaMemcpyHostToDevice,
                             stream));
  std::vector<int32_t*> at{tables_.data()};
  for (size_t i = 0; i < lds.size(); ++i)
    at.push_back(tables_.data() + bucket + int64_t(i) * (bucket + 1));
  return at;
}

const cudnn::SdpaPlan* CudnnDeviceAttention::plan_for(const SdpaShape& shape, bool backward) {
  try {
    shape.validate();
    return &plans_.get(shape, backward, handle_);
  } catch (const Error& e) {
    fall_back(e.what());
    return nullptr;
  }
}

void* CudnnDeviceAttention::workspace(int64_t bytes) {
  workspace_.resize(size_t(std::max<int64_t>(bytes, 1)));
  return workspace_.data();
}

void CudnnDeviceAttention::forward(int layer, const FlashDims& dims, const FlashQuery<T>& q,
                                   const FlashKv<T>& kv, const FlashOut<T>& res,
                                   cudaStream_t stream) {
  const std::optional<PackedDocuments> docs = documents(dims, q, kv, stream);
  if (!docs) return flash_.forward(layer, dims, q, kv, res, stream);
  const SdpaShape shape = shape_of(dims, *docs, q.ld, kv.ldk, kv.ldv, res.ld, res.ld);
  const cudnn::SdpaPlan* plan = plan_for(shape, /*backward=*/false);
  if (!plan) return flash_.forward(layer, dims, q, kv, res, stream);
  const std::vector<int32_t*> t =
      upload_tables(*docs, shape.docs, {q.ld, kv.ldk, kv.ldv, res.ld, dims.n_heads}, stream);
  scale_ = 1.0f / std::sqrt(float(dims.head_dim));
  using namespace cudnn;
  const SdpaPlan::Bindings bindings{{kUidQ, const_cast<T*>(q.q)},  {kUidK, const_cast<T*>(kv.k)},
                                    {kUidV, const_cast<T*>(kv.v)}, {kUidO, res.out},
                                    {kUidStats, res.lse},          {kUidScale, &scale_},
                                    {kUidNegInf, &neg_inf_},       {kUidSeqLenQ, t[0]},
                                    {kUidSeqLenKv, t[0]},          {kUidRaggedQ, t[1]},
                                    {kUidRaggedK, t[2]},           {kUidRaggedV, t[3]},
                                    {kUidRaggedO, t[4]},           {kUidRaggedStats, t[5]}};
  CUDNN_CHECK(cudnnSetStream(handle_, stream));
  plan->execute(handle_, bindings, workspace(plan->workspace_bytes()));
  ++cudnn_calls_;
}

void CudnnDeviceAttention::backward(int layer, const FlashDims& dims, const FlashQuery<T>& q,
                                    const FlashKv<T>& kv, const T* out, int64_t ldo,
                                    const float* lse, const T* dout, int64_t lddo, float* dq,
                                    int64_t lddq, const FlashKvGrad& kv_grad, cudaStream_t stream) {
  auto flash = [&] {
    flash_.backward(layer, dims, q, kv, out, ldo, lse, dout, lddo, dq, lddq, kv_grad, stream);
  };
  const std::optional<PackedDocuments> docs = documents(dims, q, kv, stream);
  if (!docs) return flash();
  const SdpaShape shape = shape_of(dims, *docs, q.ld, kv.ldk, kv.ldv, ldo, lddo);
  const cudnn::SdpaPlan* plan = plan_for(shape, /*backward=*/true);
  if (!plan) return flash();
  const int64_t n = q.n, H = dims.n_heads, D = dims.head_dim, kv_cols = dims.n_kv_heads * D;
  const std::vector<int32_t*> t = upload_tables(
      *docs, shape.docs, {q.ld, kv.ldk, kv.ldv, ldo, lddo, H, H * D, kv_cols}, stream);
  const cudnn::BackwardScratch scratch = cudnn::backward_scratch(shape, n);
  // The plan's own workspace first, then the graph's fp32 scratch tensors.
  const int64_t plan_bytes = (plan->workspace_bytes() + 255) / 256 * 256;
  uint8_t* ws = static_cast<uint8_t*>(workspace(plan_bytes + scratch.bytes));
  uint8_t* extra = ws + plan_bytes;
  dq_.resize(size_t(n * H * D));
  dk_.resize(size_t(n * kv_cols));
  dv_.resize(size_t(n * kv_cols));
  scale_ = 1.0f / std::sqrt(float(D));
  using namespace cudnn;
  SdpaPlan::Bindings bindings{{kUidQ, const_cast<T*>(q.q)},
                              {kUidK, const_cast<T*>(kv.k)},
                              {kUidV, const_cast<T*>(kv.v)},
                              {kUidO, const_cast<T*>(out)},
                              {kUidDO, const_cast<T*>(dout)},
                              {kUidStats, const_cast<float*>(lse)},
                              {kUidDQ, dq_.data()},
                              {kUidDK, dk_.data()},
                              {kUidDV, dv_.data()},
                              {kUidScale, &scale_},
                              {kUidNegInf, &neg_inf_},
                              {kUidOne, &one_},
                              {kUidSeqLenQ, t[0]},
                              {kUidSeqLenKv, t[0]},
                              {kUidRaggedQ, t[1]},
                              {kUidRaggedK, t[2]},
                              {kUidRaggedV, t[3]},
                              {kUidRaggedO, t[4]},
                              {kUidRaggedDO, t[5]},
                              {kUidRaggedStats, t[6]},
                              {kUidRaggedDQ, t[7]},
                              {kUidRaggedDKV, t[8]},
                              {kUidSoftmaxSum, extra + scratch.softmax_sum},
                              {kUidDQAccum, extra + scratch.dq_accum}};
  if (scratch.dk_full >= 0) {
    bindings.push_back({kUidDKFull, extra + scratch.dk_full});
    bindings.push_back({kUidDVFull, extra + scratch.dv_full});
  }
  CUDNN_CHECK(cudnnSetStream(handle_, stream));
  plan->execute(handle_, bindings, ws);
  // The contract accumulates: the model zeroed dq, dk, dv before backward.
  add_rows(dq_.data(), H * D, n, H * D, dq, lddq, stream);
  add_rows(dk_.data(), kv_cols, n, kv_cols, kv_grad.dk, kv_grad.lddk, stream);
  add_rows(dv_.data(), kv_cols, n, kv_cols, kv_grad.dv, kv_grad.lddv, stream);
  ++cudnn_calls_;
}

}  // namespace meshloom::cuda
