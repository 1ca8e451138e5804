#include "kernels/host/model/cudnn_block_attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>

#include "base/check.hpp"
#include "base/log.hpp"
#include "kernels/device/common/check.cuh"
#include "kernels/device/model/cast.hpp"
#include "kernels/host/cudnn/cudnn_check.hpp"

namespace meshloom::cuda {

using cudnn::SdpaPass;
using cudnn::SdpaShape;

CudnnBlockAttention::CudnnBlockAttention() {
  CUDNN_CHECK(cudnnCreate(&handle_));
  // Masked scores: the lowest finite float (padding rows stay finite).
  neg_inf_ = std::numeric_limits<float>::lowest();
}

CudnnBlockAttention::~CudnnBlockAttention() {
  if (handle_) cudnnDestroy(handle_);
}

void CudnnBlockAttention::fall_back(const std::string& why) {
  ++fallbacks_;
  if (reported_.insert(why).second)
    LOG_WARN("cuDNN attention (context parallel): %s; the flash kernels run these blocks",
             why.c_str());
}

std::optional<CudnnBlockAttention::Passes> CudnnBlockAttention::plan(const FlashDims& dims,
                                                                     const FlashQuery<T>& q,
                                                                     const FlashKv<T>& kv,
                                                                     cudaStream_t stream) {
  if (dims.head_dim != 64 && dims.head_dim != 128) {
    fall_back("head_dim is neither 64 nor 128");
    return std::nullopt;
  }
  q_sample_.resize(size_t(q.n));
  q_pos_.resize(size_t(q.n));
  kv_sample_.resize(size_t(kv.n));
  kv_pos_.resize(size_t(kv.n));
  download_sync(std::span<int32_t>(q_sample_), q.sample, stream);
  download_sync(std::span<int32_t>(q_pos_), q.pos, stream);
  download_sync(std::span<int32_t>(kv_sample_), kv.sample, stream);
  download_sync(std::span<int32_t>(kv_pos_), kv.pos, stream);
  std::string why;
  std::optional<Passes> passes =
      cudnn::block_documents(q_sample_, q_pos_, kv_sample_, kv_pos_, &why);
  if (!passes) fall_back(why);
  return passes;
}

void CudnnBlockAttention::clear(const FlashDims& dims, int64_t n, const FlashOut<float>& acc,
                                cudaStream_t stream) {
  const int64_t qw = int64_t(dims.n_heads) * dims.head_dim;
  CUDA_CHECK(cudaMemset2DAsync(acc.out, size_t(acc.ld) * sizeof(float), 0,
                               size_t(qw) * sizeof(float), size_t(n), stream));
  CUDA_CHECK(cudaMemsetAsync(acc.lse, 0xFE, size_t(n * dims.n_heads) * sizeof(float), stream));
}

const CudnnBlockAttention::Passes* CudnnBlockAttention::step_passes(int step, const FlashDims& dims,
                                                                    const FlashQuery<T>& q,
                                                                    const FlashKv<T>& kv,
                                                                    cudaStream_t stream) {
  StepPlan& s = steps_[step];
  if (s.kv_n != kv.n) {
    s.passes = plan(dims, q, kv, stream);
    s.kv_n = kv.n;
  }
  return s.passes ? &*s.passes : nullptr;
}

bool CudnnBlockAttention::forward_step(int step, const FlashDims& dims, const FlashQuery<T>& q,
                                       const FlashKv<T>& kv, const FlashOut<float>& acc,
                                       cudaStream_t stream) {
  const Passes* passes = step_passes(step, dims, q, kv, stream);
  return passes && forward(dims, q, kv, *passes, acc, stream);
}

bool CudnnBlockAttention::backward_step(int step, const FlashDims& dims, const FlashQuery<T>& q,
                                        const FlashKv<T>& kv, const T* out, int64_t ldo,
                                        const float* lse, const T* dout, int64_t lddo, float* dq,
                                        int64_t lddq, const FlashKvGrad& kv_grad,
                                        cudaStream_t stream) {
  const Passes* passes = step_passes(step, dims, q, kv, stream);
  return passes &&
         backward(dims, q, kv, *passes, out, ldo, lse, dout, lddo, dq, lddq, kv_grad, stream);
}

SdpaShape CudnnBlockAttention::shape_of(const FlashDims& dims, const SdpaPass& pass, int64_t ld_q,
                                        int64_t ld_k, int64_t ld_v, int64_t ld_o,
                                        int64_t ld_do) const {
  SdpaShape s;
  s.docs = cudnn::bucket_docs(int64_t(pass.docs.size()));
  s.max_len = cudnn::bucket_len(pass.max_len());
  s.heads = dims.n_heads;
  s.kv_heads = dims.n_kv_heads;
  s.head_dim = dims.head_dim;
  s.ld_q = ld_q;
  s.ld_k = ld_k;
  s.ld_v = ld_v;
  s.ld_o = ld_o;
  s.ld_do = ld_do;
  s.causal = pass.causal;
  return s;
}

std::vector<const cudnn::SdpaPlan*> CudnnBlockAttention::plans_for(const FlashDims& dims,
                                                                   const Passes& passes,
                                                                   const std::vector<int64_t>& lds,
                                                                   bool backward) {
  std::vector<const cudnn::SdpaPlan*> plans;
  try {
    for (const SdpaPass& pass : passes) {
      const SdpaShape shape = shape_of(dims, pass, lds[0], lds[1], lds[2], lds[3], lds[4]);
      shape.validate();
      plans.push_back(&plans_.get(shape, backward, handle_));
    }
  } catch (const Error& e) {
    fall_back(e.what());
    plans.clear();
  }
  return plans;
}

std::vector<int32_t*> CudnnBlockAttention::upload_tables(const SdpaPass& pass, int64_t bucket,
                                                         int64_t nq, int64_t nkv,
                                                         const std::vector<Table>& tables,
                                                         cudaStream_t stream) {
  host_tables_ = cudnn::pass_q_lengths(pass, bucket);
  const std::vector<int32_t> kv_lengths = cudnn::pass_kv_lengths(pass, bucket);
  host_tables_.insert(host_tables_.end(), kv_lengths.begin(), kv_lengths.end());
  for (const Table& t : tables) {
    const std::vector<int32_t> offsets = t.kv_side ? cudnn::pass_kv_offsets(pass, bucket, nkv, t.ld)
                                                   : cudnn::pass_q_offsets(pass, bucket, nq, t.ld);
    host_tables_.insert(host_tables_.end(), offsets.begin(), offsets.end());
  }
  tables_.resize(host_tables_.size());
  // Pageable source: staged before the call returns, and ordered on the
  // stream after the previous pass that read the tables.
  CUDA_CHECK(cudaMemcpyAsync(tables_.data(), host_tables_.data(),
                             host_tables_.size() * sizeof(int32_t), cudaMemcpyHostToDevice,
                             stream));
  std::vector<int32_t*> at{tables_.data(), tables_.data() + bucket};
  for (size_t i = 0; i < tables.size(); ++i)
    at.push_back(tables_.data() + 2 * bucket + int64_t(i) * (bucket + 1));
  return at;
}

void* CudnnBlockAttention::workspace(int64_t bytes) {
  workspace_.resize(size_t(std::max<int64_t>(bytes, 1)));
  return workspace_.data();
}

bool CudnnBlockAttention::forward(const FlashDims& dims, const FlashQuery<T>& q,
                                  const FlashKv<T>& kv, const Passes& passes,
                                  const FlashOut<float>& acc, cudaStream_t stream) {
  const int64_t H = dims.n_heads, qw = H * dims.head_dim;
  const std::vector<const cudnn::SdpaPlan*> plans =
      plans_for(dims, passes, {q.ld, kv.ldk, kv.ldv, qw, qw}, /*backward=*/false);
  if (plans.size() != passes.size()) return false;
  part_.resize(size_t(q.n * qw));
  part_f_.resize(size_t(q.n * qw));
  part_lse_.resize(size_t(q.n * H));
  scale_ = 1.0f / std::sqrt(float(dims.head_dim));
  CUDNN_CHECK(cudnnSetStream(handle_, stream));
  for (size_t i = 0; i < passes.size(); ++i) {
    const cudnn::SdpaPlan& plan = *plans[i];
    const int64_t bucket = plan.graph().shape.docs;
    const std::vector<int32_t*> t = upload_tables(
        passes[i], bucket, q.n, kv.n,
        {{false, q.ld}, {true, kv.ldk}, {true, kv.ldv}, {false, qw}, {false, H}}, stream);
    // Rows no document of this pass covers keep "nothing seen".
    CUDA_CHECK(cudaMemsetAsync(part_.data(), 0, size_t(q.n * qw) * sizeof(T), stream));
    CUDA_CHECK(cudaMemsetAsync(part_lse_.data(), 0xFE, size_t(q.n * H) * sizeof(float), stream));
    using namespace cudnn;
    const SdpaPlan::Bindings bindings{
        {kUidQ, const_cast<T*>(q.q)}, {kUidK, const_cast<T*>(kv.k)}, {kUidV, const_cast<T*>(kv.v)},
        {kUidO, part_.data()},        {kUidStats, part_lse_.data()}, {kUidScale, &scale_},
        {kUidNegInf, &neg_inf_},      {kUidSeqLenQ, t[0]},           {kUidSeqLenKv, t[1]},
        {kUidRaggedQ, t[2]},          {kUidRaggedK, t[3]},           {kUidRaggedV, t[4]},
        {kUidRaggedO, t[5]},          {kUidRaggedStats, t[6]}};
    plan.execute(handle_, bindings, workspace(plan.workspace_bytes()));
    convert<T, float>(part_.data(), q.n * qw, part_f_.data(), stream);
    flash_attention_merge<float>(dims, q.n, acc, part_f_.data(), qw, part_lse_.data(), stream);
    ++cudnn_passes_;
  }
  return true;
}

bool CudnnBlockAttention::backward(const FlashDims& dims, const FlashQuery<T>& q,
                                   const FlashKv<T>& kv, const Passes& passes, const T* out,
                                   int64_t ldo, const float* lse, const T* dout, int64_t lddo,
                                   float* dq, int64_t lddq, const FlashKvGrad& kv_grad,
                                   cudaStream_t stream) {
  const std::vector<const cudnn::SdpaPlan*> plans =
      plans_for(dims, passes, {q.ld, kv.ldk, kv.ldv, ldo, lddo}, /*backward=*/true);
  if (plans.size() != passes.size()) return false;
  const int64_t H = dims.n_heads, D = dims.head_dim, qw = H * D, kv_cols = dims.n_kv_heads * D;
  dq_.resize(size_t(q.n * qw));
  dk_.resize(size_t(kv.n * kv_cols));
  dv_.resize(size_t(kv.n * kv_cols));
  scale_ = 1.0f / std::sqrt(float(D));
  CUDNN_CHECK(cudnnSetStream(handle_, stream));
  for (size_t i = 0; i < passes.size(); ++i) {
    const cudnn::SdpaPlan& plan = *plans[i];
    const SdpaShape& shape = plan.graph().shape;
    const std::vector<int32_t*> t = upload_tables(passes[i], shape.docs, q.n, kv.n,
                                                  {{false, q.ld},
                                                   {true, kv.ldk},
                                                   {true, kv.ldv},
                                                   {false, ldo},
                                                   {false, lddo},
                                                   {false, H},
                                                   {false, qw},
                                                   {true, kv_cols}},
                                                  stream);
    const cudnn::BackwardScratch scratch = cudnn::backward_scratch(shape, std::max(q.n, kv.n));
    const int64_t plan_bytes = (plan.workspace_bytes() + 255) / 256 * 256;
    uint8_t* ws = static_cast<uint8_t*>(workspace(plan_bytes + scratch.bytes));
    uint8_t* extra = ws + plan_bytes;
    // Rows outside this pass's documents add nothing.
    CUDA_CHECK(cudaMemsetAsync(dq_.data(), 0, dq_.size() * sizeof(T), stream));
    CUDA_CHECK(cudaMemsetAsync(dk_.data(), 0, dk_.size() * sizeof(T), stream));
    CUDA_CHECK(cudaMemsetAsync(dv_.data(), 0, dv_.size() * sizeof(T), stream));
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
                                {kUidSeqLenKv, t[1]},
                                {kUidRaggedQ, t[2]},
                                {kUidRaggedK, t[3]},
                                {kUidRaggedV, t[4]},
                                {kUidRaggedO, t[5]},
                                {kUidRaggedDO, t[6]},
                                {kUidRaggedStats, t[7]},
                                {kUidRaggedDQ, t[8]},
                                {kUidRaggedDKV, t[9]},
                                {kUidSoftmaxSum, extra + scratch.softmax_sum},
                                {kUidDQAccum, extra + scratch.dq_accum}};
    if (scratch.dk_full >= 0) {
      bindings.push_back({kUidDKFull, extra + scratch.dk_full});
      bindings.push_back({kUidDVFull, extra + scratch.dv_full});
    }
    plan.execute(handle_, bindings, ws);
    add_rows(dq_.data(), qw, q.n, qw, dq, lddq, stream);
    add_rows(dk_.data(), kv_cols, kv.n, kv_cols, kv_grad.dk, kv_grad.lddk, stream);
    add_rows(dv_.data(), kv_cols, kv.n, kv_cols, kv_grad.dv, kv_grad.lddv, stream);
    ++cudnn_passes_;
  }
  return true;
}

}  // namespace meshloom::cuda
