#include "kernels/host/model/cudnn_device_attention.hpp"

#include <span>

#include "base/check.hpp"
#include "base/log.hpp"
#include "kernels/device/common/check.cuh"
#include "kernels/device/model/cast.hpp"

namespace meshloom::cuda {

using cudnn::PackedDocuments;
using cudnn::SdpaShape;

void CudnnDeviceAttention::fall_back(const std::string& why) {
  ++fallback_calls_;
  if (session_.first_report(why))
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
  if (!CudnnSession::takes_head_dim(dims.head_dim)) {
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

std::vector<int32_t*> CudnnDeviceAttention::upload_tables(const PackedDocuments& docs,
                                                          int64_t bucket,
                                                          const std::vector<int64_t>& lds,
                                                          cudaStream_t stream) {
  std::vector<int32_t>& host = session_.host_tables();
  host = cudnn::sequence_lengths(docs, bucket);
  for (int64_t ld : lds) {
    const std::vector<int32_t> offsets = cudnn::ragged_offsets(docs, bucket, ld);
    host.insert(host.end(), offsets.begin(), offsets.end());
  }
  int32_t* tables = session_.upload_tables(stream);
  std::vector<int32_t*> at{tables};
  for (size_t i = 0; i < lds.size(); ++i) at.push_back(tables + bucket + int64_t(i) * (bucket + 1));
  return at;
}

const cudnn::SdpaPlan* CudnnDeviceAttention::plan_for(const SdpaShape& shape, bool backward) {
  std::string why;
  const cudnn::SdpaPlan* plan = session_.plan(shape, backward, &why);
  if (!plan) fall_back(why);
  return plan;
}

void CudnnDeviceAttention::forward(int layer, const FlashDims& dims, const FlashQuery<T>& q,
                                   const FlashKv<T>& kv, const FlashOut<T>& res,
                                   cudaStream_t stream) {
  const std::optional<PackedDocuments> docs = documents(dims, q, kv, stream);
  if (!docs) return flash_.forward(layer, dims, q, kv, res, stream);
  const SdpaShape shape =
      CudnnSession::shape(dims, docs->count(), docs->max_len, q.ld, kv.ldk, kv.ldv, res.ld, res.ld);
  const cudnn::SdpaPlan* plan = plan_for(shape, /*backward=*/false);
  if (!plan) return flash_.forward(layer, dims, q, kv, res, stream);
  const std::vector<int32_t*> t =
      upload_tables(*docs, shape.docs, {q.ld, kv.ldk, kv.ldv, res.ld, dims.n_heads}, stream);
  const cudnn::SdpaPlan::Bindings bindings =
      CudnnSession::bindings({.q = q.q, .k = kv.k, .v = kv.v, .out = res.out, .lse = res.lse}, t[0],
                             t[0], std::span(t).subspan(1));
  session_.execute(*plan, bindings, dims.head_dim, session_.workspace(plan->workspace_bytes()),
                   stream);
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
  const SdpaShape shape =
      CudnnSession::shape(dims, docs->count(), docs->max_len, q.ld, kv.ldk, kv.ldv, ldo, lddo);
  const cudnn::SdpaPlan* plan = plan_for(shape, /*backward=*/true);
  if (!plan) return flash();
  const int64_t n = q.n, H = dims.n_heads, D = dims.head_dim, kv_cols = dims.n_kv_heads * D;
  const std::vector<int32_t*> t = upload_tables(
      *docs, shape.docs, {q.ld, kv.ldk, kv.ldv, ldo, lddo, H, H * D, kv_cols}, stream);
  dq_.resize(size_t(n * H * D));
  dk_.resize(size_t(n * kv_cols));
  dv_.resize(size_t(n * kv_cols));
  const SdpaTensors x{q.q, kv.k, kv.v, out, lse, dout, dq_.data(), dk_.data(), dv_.data()};
  cudnn::SdpaPlan::Bindings bindings =
      CudnnSession::bindings(x, t[0], t[0], std::span(t).subspan(1));
  void* ws = session_.backward_workspace(*plan, cudnn::backward_scratch(shape, n), &bindings);
  session_.execute(*plan, bindings, dims.head_dim, ws, stream);
  // The contract accumulates: the model zeroed dq, dk, dv before backward.
  add_rows(dq_.data(), H * D, n, H * D, dq, lddq, stream);
  add_rows(dk_.data(), kv_cols, n, kv_cols, kv_grad.dk, kv_grad.lddk, stream);
  add_rows(dv_.data(), kv_cols, n, kv_cols, kv_grad.dv, kv_grad.lddv, stream);
  ++cudnn_calls_;
}

}  // namespace meshloom::cuda
