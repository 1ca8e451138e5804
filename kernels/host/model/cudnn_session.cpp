#include "kernels/host/model/cudnn_session.hpp"

#include <algorithm>
#include <cmath>

#include "base/check.hpp"
#include "kernels/device/common/check.cuh"
#include "kernels/host/cudnn/cudnn_check.hpp"
#include "kernels/host/cudnn/sdpa_documents.hpp"

namespace meshloom::cuda {

CudnnSession::CudnnSession() { CUDNN_CHECK(cudnnCreate(&handle_)); }

CudnnSession::~CudnnSession() {
  if (handle_) cudnnDestroy(handle_);
}

cudnn::SdpaShape CudnnSession::shape(const FlashDims& dims, int64_t docs, int64_t max_len,
                                     int64_t ld_q, int64_t ld_k, int64_t ld_v, int64_t ld_o,
                                     int64_t ld_do) {
  cudnn::SdpaShape s;
  s.docs = cudnn::bucket_docs(docs);
  s.max_len = cudnn::bucket_len(max_len);
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

cudnn::SdpaPlan::Bindings CudnnSession::bindings(const SdpaTensors& x, int32_t* seq_q,
                                                 int32_t* seq_kv,
                                                 std::span<int32_t* const> ragged) {
  using namespace cudnn;
  auto at = [](const void* p) { return const_cast<void*>(p); };
  SdpaPlan::Bindings b{{kUidQ, at(x.q)},         {kUidK, at(x.k)},         {kUidV, at(x.v)},
                       {kUidO, at(x.out)},       {kUidStats, at(x.lse)},   {kUidSeqLenQ, seq_q},
                       {kUidSeqLenKv, seq_kv},   {kUidRaggedQ, ragged[0]}, {kUidRaggedK, ragged[1]},
                       {kUidRaggedV, ragged[2]}, {kUidRaggedO, ragged[3]}};
  if (ragged.size() == 5) {
    b.push_back({kUidRaggedStats, ragged[4]});
    return b;
  }
  ML_CHECK(ragged.size() == 8, "cuDNN attention: 5 or 8 ragged offset tables");
  b.insert(b.end(), {{kUidDO, at(x.dout)},
                     {kUidDQ, at(x.dq)},
                     {kUidDK, at(x.dk)},
                     {kUidDV, at(x.dv)},
                     {kUidRaggedDO, ragged[4]},
                     {kUidRaggedStats, ragged[5]},
                     {kUidRaggedDQ, ragged[6]},
                     {kUidRaggedDKV, ragged[7]}});
  return b;
}

const cudnn::SdpaPlan* CudnnSession::plan(const cudnn::SdpaShape& shape, bool backward,
                                          std::string* why) {
  try {
    shape.validate();
    return &plans_.get(shape, backward, handle_);
  } catch (const Error& e) {
    *why = e.what();
    return nullptr;
  }
}

int32_t* CudnnSession::upload_tables(cudaStream_t stream) {
  tables_.resize(host_tables_.size());
  // Pageable source: the copy is staged before the call returns, so the
  // host tables may change afterwards; on the stream it follows the
  // previous call that read the device tables.
  CUDA_CHECK(cudaMemcpyAsync(tables_.data(), host_tables_.data(),
                             host_tables_.size() * sizeof(int32_t), cudaMemcpyHostToDevice,
                             stream));
  return tables_.data();
}

void* CudnnSession::workspace(int64_t bytes) {
  workspace_.resize(size_t(std::max<int64_t>(bytes, 1)));
  return workspace_.data();
}

void* CudnnSession::backward_workspace(const cudnn::SdpaPlan& plan,
                                       const cudnn::BackwardScratch& scratch,
                                       cudnn::SdpaPlan::Bindings* bindings) {
  const int64_t plan_bytes = (plan.workspace_bytes() + 255) / 256 * 256;
  uint8_t* ws = static_cast<uint8_t*>(workspace(plan_bytes + scratch.bytes));
  uint8_t* extra = ws + plan_bytes;
  bindings->push_back({cudnn::kUidSoftmaxSum, extra + scratch.softmax_sum});
  bindings->push_back({cudnn::kUidDQAccum, extra + scratch.dq_accum});
  if (scratch.dk_full >= 0) {
    bindings->push_back({cudnn::kUidDKFull, extra + scratch.dk_full});
    bindings->push_back({cudnn::kUidDVFull, extra + scratch.dv_full});
  }
  return ws;
}

void CudnnSession::execute(const cudnn::SdpaPlan& plan, cudnn::SdpaPlan::Bindings bindings,
                           int head_dim, void* workspace, cudaStream_t stream) {
  scale_ = 1.0f / std::sqrt(float(head_dim));
  bindings.push_back({cudnn::kUidScale, &scale_});
  bindings.push_back({cudnn::kUidNegInf, &masked_score_});
  bindings.push_back({cudnn::kUidOne, &one_});
  CUDNN_CHECK(cudnnSetStream(handle_, stream));
  plan.execute(handle_, bindings, workspace);
}

}  // namespace meshloom::cuda
