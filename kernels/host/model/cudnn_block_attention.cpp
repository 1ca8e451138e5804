#include "kernels/host/model/cudnn_block_attention.hpp"

#include <algorithm>
#include <span>

#include "base/check.hpp"
#include "base/log.hpp"
#include "kernels/device/common/check.cuh"
#include "kernels/device/model/cast.hpp"

namespace meshloom::cuda {

using cudnn::SdpaPass;
using cudnn::SdpaShape;

namespace {

// The lse of a row that has seen nothing: every byte 0xFE, about −1.7e38,
// which every merge weighs as nothing.
constexpr int kEmptyLseByte = 0xFE;

}  // namespace

void CudnnBlockAttention::fall_back(const std::string& why) {
  ++fallbacks_;
  if (session_.first_report(why))
    LOG_WARN("cuDNN attention (context parallel): %s; the flash kernels run these blocks",
             why.c_str());
}

std::optional<CudnnBlockAttention::Passes> CudnnBlockAttention::plan(const FlashDims& dims,
                                                                     const FlashQuery<T>& q,
                                                                     const FlashKv<T>& kv,
                                                                     cudaStream_t stream) {
  if (!CudnnSession::takes_head_dim(dims.head_dim)) {
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
  CUDA_CHECK(
      cudaMemsetAsync(acc.lse, kEmptyLseByte, size_t(n * dims.n_heads) * sizeof(float), stream));
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

std::vector<const cudnn::SdpaPlan*> CudnnBlockAttention::plans_for(const FlashDims& dims,
                                                                   const Passes& passes,
                                                                   const std::vector<int64_t>& lds,
                                                                   bool backward) {
  std::vector<const cudnn::SdpaPlan*> plans;
  for (const SdpaPass& pass : passes) {
    SdpaShape shape = CudnnSession::shape(dims, int64_t(pass.docs.size()), pass.max_len(), lds[0],
                                          lds[1], lds[2], lds[3], lds[4]);
    shape.causal = pass.causal;
    std::string why;
    const cudnn::SdpaPlan* plan = session_.plan(shape, backward, &why);
    if (!plan) {
      fall_back(why);
      return {};
    }
    plans.push_back(plan);
  }
  return plans;
}

std::vector<int32_t*> CudnnBlockAttention::upload_tables(const SdpaPass& pass, int64_t bucket,
                                                         int64_t nq, int64_t nkv,
                                                         const std::vector<Table>& tables,
                                                         cudaStream_t stream) {
  std::vector<int32_t>& host = session_.host_tables();
  host = cudnn::pass_q_lengths(pass, bucket);
  const std::vector<int32_t> kv_lengths = cudnn::pass_kv_lengths(pass, bucket);
  host.insert(host.end(), kv_lengths.begin(), kv_lengths.end());
  for (const Table& t : tables) {
    const std::vector<int32_t> offsets = t.kv_side ? cudnn::pass_kv_offsets(pass, bucket, nkv, t.ld)
                                                   : cudnn::pass_q_offsets(pass, bucket, nq, t.ld);
    host.insert(host.end(), offsets.begin(), offsets.end());
  }
  int32_t* device = session_.upload_tables(stream);
  std::vector<int32_t*> at{device, device + bucket};
  for (size_t i = 0; i < tables.size(); ++i)
    at.push_back(device + 2 * bucket + int64_t(i) * (bucket + 1));
  return at;
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
  for (size_t i = 0; i < passes.size(); ++i) {
    const cudnn::SdpaPlan& plan = *plans[i];
    const int64_t bucket = plan.graph().shape.docs;
    const std::vector<int32_t*> t = upload_tables(
        passes[i], bucket, q.n, kv.n,
        {{false, q.ld}, {true, kv.ldk}, {true, kv.ldv}, {false, qw}, {false, H}}, stream);
    // Rows no document of this pass covers keep "nothing seen".
    CUDA_CHECK(cudaMemsetAsync(part_.data(), 0, size_t(q.n * qw) * sizeof(T), stream));
    CUDA_CHECK(
        cudaMemsetAsync(part_lse_.data(), kEmptyLseByte, size_t(q.n * H) * sizeof(float), stream));
    const cudnn::SdpaPlan::Bindings bindings = CudnnSession::bindings(
        {.q = q.q, .k = kv.k, .v = kv.v, .out = part_.data(), .lse = part_lse_.data()}, t[0], t[1],
        std::span(t).subspan(2));
    session_.execute(plan, bindings, dims.head_dim, session_.workspace(plan.workspace_bytes()),
                     stream);
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
    // Rows outside this pass's documents add nothing.
    CUDA_CHECK(cudaMemsetAsync(dq_.data(), 0, dq_.size() * sizeof(T), stream));
    CUDA_CHECK(cudaMemsetAsync(dk_.data(), 0, dk_.size() * sizeof(T), stream));
    CUDA_CHECK(cudaMemsetAsync(dv_.data(), 0, dv_.size() * sizeof(T), stream));
    cudnn::SdpaPlan::Bindings bindings = CudnnSession::bindings(
        {q.q, kv.k, kv.v, out, lse, dout, dq_.data(), dk_.data(), dv_.data()}, t[0], t[1],
        std::span(t).subspan(2));
    void* ws = session_.backward_workspace(
        plan, cudnn::backward_scratch(shape, std::max(q.n, kv.n)), &bindings);
    session_.execute(plan, bindings, dims.head_dim, ws, stream);
    add_rows(dq_.data(), qw, q.n, qw, dq, lddq, stream);
    add_rows(dk_.data(), kv_cols, kv.n, kv_cols, kv_grad.dk, kv_grad.lddk, stream);
    add_rows(dv_.data(), kv_cols, kv.n, kv_cols, kv_grad.dv, kv_grad.lddv, stream);
    ++cudnn_passes_;
  }
  return true;
}

}  // namespace meshloom::cuda
