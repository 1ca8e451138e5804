// CudaBackend: the trainer's TrainerBackend on one GPU (lib/train/backend.hpp):
// a cuda::Transformer in bf16 or fp32 on its own stream, the optimizer's state
// beside it (train/device_adamw.hpp), and the gradient reduction over NCCL
// (comm/grad_reducer.hpp) or through host memory. lib/train/cuda_module.cpp
// loads it through this file's module entry point.
// With tensor parallelism the model is this trainer's TP shard; its group
// collectives go over NCCL where every trainer has its own GPU, else through
// host memory (device_tp_comm.hpp), and gradients are summed over the data
// axis only. start_optimizer() first hands the GPU's free memory to the
// trainer's check (plan/cost/device_memory.hpp), so a run that cannot fit ends
// there with the numbers, not with an out-of-memory error mid-step.
// With pipeline parallelism the model is this trainer's stage: each
// micro-batch keeps its activations between forward and backward
// (Transformer::swap_saved), and stage transfers go device to device over
// NCCL (stage_link.hpp) where every trainer has its own GPU, else over MPI.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <type_traits>
#include <utility>

#include "base/check.hpp"
#include "base/strings.hpp"
#include "comm/mpi_check.hpp"
#include "kernels/device/common/check.cuh"
#include "kernels/device/device_info.hpp"
#include "kernels/device/model/cast.hpp"
#include "kernels/device/ops/adamw.hpp"
#include "kernels/host/blas/gemm.hpp"
#include "kernels/host/comm/grad_reducer.hpp"
#include "kernels/host/comm/group_comms.hpp"
#include "kernels/host/comm/nccl_comm.hpp"
#include "kernels/host/device_buffer.hpp"
#include "kernels/host/model/backend_helpers.hpp"
#include "kernels/host/model/device_ring_attention.hpp"
#include "kernels/host/model/device_tp_comm.hpp"
#include "kernels/host/model/device_ulysses_attention.hpp"
#include "kernels/host/model/stage_link.hpp"
#include "kernels/host/model/transformer.hpp"
#include "kernels/host/module.hpp"
#include "kernels/host/train/device_adamw.hpp"
#include "train/backend.hpp"

namespace meshloom::cuda {
namespace {

using model::Op;
using train::CudaBackendSpec;
using train::DeviceMemoryInfo;
using train::OptimizerSetup;
using train::RingGroup;
using train::TrainerBackend;

// The GPU of the trainer with index `local_index` among its node's trainers:
// more trainers than GPUs share them.
int device_of(int local_index, int devices) { return local_index % devices; }

template <class T>
class CudaBackend final : public TrainerBackend {
 public:
  // The model itself is allocated by start_optimizer(), after the memory check.
  CudaBackend(const model::Shape& shape, const CudaBackendSpec& spec, int device, int devices,
              std::string name)
      : shape_(shape),
        shard_(spec.shard),
        stage_(spec.stage),
        loss_chunk_(spec.loss_chunk),
        device_(device),
        devices_(devices),
        name_(std::move(name)) {
    CUDA_CHECK(cudaSetDevice(device));
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    keep_stream_ordered_scratch(device);
  }
  ~CudaBackend() override {
    // The reducer waits for its reductions; communicators go before the
    // trainers' one they were split from.
    reducer_.reset();
    stage_link_.reset();
    parked_.clear();  // their attention, before the communicators
    groups_.reset();
    if (grad_comm_) ncclCommDestroy(grad_comm_);
    nccl_.reset();
    tp_.reset();
    tp_nccl_.reset();
    optimizer_.reset();
    model_.reset();
    if (host_sum_sq_) cudaFreeHost(host_sum_sq_);
    if (stream_) cudaStreamDestroy(stream_);
  }
  std::string describe() const override { return name_; }

  void start_optimizer(const OptimizerSetup& opt, std::span<const float> params) override {
    opt_ = opt;
    MPI_CHECK(MPI_Comm_rank(opt.trainers, &rank_));
    MPI_CHECK(MPI_Comm_size(opt.trainers, &size_));
    // Sharing a GPU, and so NCCL, is a matter of all trainers, not only of
    // those this one sums gradients with (the data axis at tp > 1).
    const MPI_Comm everyone = opt.all_trainers != MPI_COMM_NULL ? opt.all_trainers : opt.trainers;
    DeviceMemoryInfo memory = measure_memory(everyone);
    bool nccl = false;
    if (opt.comm != config::GpuComm::mpi) {  // the same config, so the same calls, on every trainer
      std::string why;
      nccl = cuda::nccl_usable(everyone, &why);  // one answer on every trainer
      if (!nccl && opt.comm == config::GpuComm::nccl)
        throw Error("run.gpu_comm: nccl, but " + why +
                    "; run.gpu_comm: mpi (or auto) reduces through host memory instead");
    }
    memory.nccl = nccl;
    if (opt.check_memory) opt.check_memory(memory);
    if (shard_.size > 1) start_tp_comm(opt, nccl);
    model_ = std::make_unique<cuda::Transformer<T>>(shape_, stream_, loss_chunk_, shard_, tp_.get(),
                                                    stage_);
    const int64_t n = model_->layout().numel();
    start_grad_norm(opt);
    if (nccl) {
      nccl_ = std::make_unique<cuda::NcclComm>(opt.trainers, device_);
      // Gradients get a communicator of their own: their reductions run on
      // another stream than the rings' exchanges on the trainers' one.
      NCCL_CHECK(ncclCommSplit(nccl_->get(), 0, rank_, &grad_comm_, nullptr));
      reducer_ = std::make_unique<cuda::GradReducer>(grad_comm_, model_->grads(), n, stream_);
      // Ulysses' all-to-alls (and rings) get a communicator per CP group.
      cuda::GroupCommsOptions group_options;
      group_options.byte_budget = opt.group_cache_bytes;
      group_options.timeout_s = opt.timeout_s;
      groups_ = std::make_unique<cuda::GroupComms>(nccl_->get(), group_options);
      if (opt.pp > 1) stage_link_ = std::make_unique<cuda::StageLink<T>>(opt.pipeline, device_);
    }
    sharded_ = !(opt.begin == 0 && opt.end == n);
    ML_CHECK(!sharded_ || opt.shard_size * size_ >= n, "ZeRO-1 shards do not cover the model");
    const cuda::AdamWHyper hyper{opt.beta1, opt.beta2, opt.eps, opt.weight_decay};
    optimizer_ = std::make_unique<cuda::DeviceAdamW>(n, sharded_ ? opt.shard_size * size_ : n,
                                                     opt.begin, opt.end, hyper, opt.decay, stream_);
    load_state(params, {}, {}, 0);
    name_ += nccl ? ", gradients over NCCL" : ", gradients through host memory (MPI)";
    if (shard_.size > 1)
      name_ += strf(", TP rank %lld of %lld over %s", (long long)shard_.rank,
                    (long long)shard_.size, nccl ? "NCCL" : "MPI through host memory");
    if (opt.pp > 1)
      name_ += strf(", pipeline stage of layers %lld-%lld, stage transfers over %s",
                    (long long)model_->layout().stage().first,
                    (long long)model_->layout().stage().end - 1,
                    nccl ? "NCCL" : "MPI through host memory");
  }

  void load_state(std::span<const float> params, std::span<const float> m, std::span<const float> v,
                  int64_t step) override {
    ML_CHECK(optimizer_, "load_state before start_optimizer");
    optimizer_->load(params, m, v, step);
    model_->set_params_device(optimizer_->master());
  }

  void zero_grads() override { model_->zero_grads(); }

  comm::GroupCommStats prepare_groups(const std::vector<std::vector<int>>& groups) override {
    return groups_ ? groups_->prepare(groups) : comm::GroupCommStats{};
  }

  int64_t optimizer_steps() const override { return optimizer_ ? optimizer_->step() : 0; }

  model::LossSum forward_backward(const model::Batch& batch, double scale, const RingGroup* ring,
                                  float offload, bool last) override {
    const std::unique_ptr<cuda::DeviceAttention<T>> attention = make_attention(ring);
    const model::LossSum ls = model_->forward(batch, attention.get(), offloaded_layers(offload));
    // The last micro-batch's gradients are final layer by layer: their
    // buckets go to NCCL while backward goes on.
    if (last && reducer_)
      model_->backward(
          scale, [this](int64_t offset, int64_t count) { reducer_->mark_ready(offset, count); });
    else
      model_->backward(scale);
    // Done here, so the trainer's per-micro-batch times are the device's
    // (the cost model is calibrated on them), and `attention` may go.
    wait(ring ? "a micro-batch with context-parallel attention" : "a micro-batch");
    return ls;
  }

  std::vector<float> forward_stage(const model::Batch& batch, std::span<const float> input,
                                   const RingGroup* ring, int slot) override {
    ML_CHECK(!parked_.count(slot), strf("pipeline slot %d runs forward twice", slot));
    Parked& p = parked_[slot];
    p.attention = make_attention(ring);
    model_->forward(batch, p.attention.get(), 0,
                    stage_input(input, batch.size(), slot, !model_->layout().first_stage()));
    std::vector<float> out =
        stage_result(model_->output(), batch.size(), StageTransfer::activations, slot);
    if (!spare_.empty()) {
      p.saved = std::move(spare_.back());
      spare_.pop_back();
    }
    model_->swap_saved(p.saved);  // parked; the model gets spare buffers
    wait("a pipeline stage's forward");
    return out;
  }

  model::LossSum last_stage(const model::Batch& batch, double scale, std::span<const float> input,
                            const RingGroup* ring, int slot,
                            std::vector<float>* input_grad) override {
    const auto attention = make_attention(ring);
    const bool first = model_->layout().first_stage();
    const model::LossSum ls =
        model_->forward(batch, attention.get(), 0, stage_input(input, batch.size(), slot, !first));
    model_->backward(scale);
    if (!first)
      *input_grad =
          stage_result(model_->input_grad(), batch.size(), StageTransfer::gradients, slot);
    wait("the last pipeline stage's forward and backward");
    return ls;
  }

  // Evaluation: the model's forward alone (its loss writes no gradient;
  // backward() is never called), in the buffers training uses.
  model::LossSum forward_loss(const model::Batch& batch, std::span<const float> input,
                              const RingGroup* ring, int slot, float offload) override {
    const auto attention = make_attention(ring);
    const bool first = model_->layout().first_stage();
    model::LossSum ls = model_->forward(batch, attention.get(), offloaded_layers(offload),
                                        stage_input(input, batch.size(), slot, !first));
    wait(ring ? "an evaluation micro-batch with context-parallel attention"
              : "an evaluation micro-batch");
    ls.token_loss = model_->token_losses();
    return ls;
  }

  std::vector<float> forward_stage_only(const model::Batch& batch, std::span<const float> input,
                                        const RingGroup* ring, int slot) override {
    const auto attention = make_attention(ring);
    model_->forward(batch, attention.get(), 0,
                    stage_input(input, batch.size(), slot, !model_->layout().first_stage()));
    std::vector<float> out =
        stage_result(model_->output(), batch.size(), StageTransfer::activations, slot);
    wait("a pipeline stage's evaluation forward");  // before `attention` goes
    return out;
  }

  std::vector<float> backward_stage(std::span<const float> d_output, int slot) override {
    auto it = parked_.find(slot);
    ML_CHECK(it != parked_.end(), strf("pipeline slot %d runs backward before forward", slot));
    model_->swap_saved(it->second.saved);
    const int64_t n = model_->tokens();
    model_->backward(1.0, {}, stage_input(d_output, n, slot, true));
    std::vector<float> dx;
    if (!model_->layout().first_stage())
      dx = stage_result(model_->input_grad(), n, StageTransfer::gradients, slot);
    wait("a pipeline stage's backward");  // before its attention goes
    spare_.push_back(std::move(it->second.saved));
    parked_.erase(it);
    return dx;
  }

  bool moves_stages() const override { return stage_link_ != nullptr; }

  void recv_stage(StageTransfer what, int slot, int64_t tokens, double timeout_s,
                  const std::function<std::string()>& waiting_for) override {
    ML_CHECK(stage_link_, "recv_stage without NCCL stage transfers");
    received_slot_ = slot;
    stage_link_->recv(way(what), received_, tokens * shape_.d_model, stream_, timeout_s,
                      waiting_for);
  }

  void send_stage(StageTransfer what, int slot) override {
    ML_CHECK(stage_link_, "send_stage without NCCL stage transfers");
    auto it = outgoing_.find({what, slot});
    ML_CHECK(it != outgoing_.end(), strf("pipeline slot %d has nothing to send", slot));
    stage_link_->send(way(what), std::move(it->second.values), it->second.count, stream_);
    outgoing_.erase(it);
  }

  void finish_stage_sends(double timeout_s) override {
    if (stage_link_) stage_link_->finish(timeout_s);
  }

  double reduce_grads() override {
    ML_CHECK(optimizer_, "reduce_grads before start_optimizer");
    float* grads = model_->grads();
    const int64_t n = model_->layout().numel();
    if (opt_.tie_embedding) {
      // Stages 0 and pp - 1 sum the tied embedding's gradient (the trainer's
      // MPI exchange, as the CPU backend's) before the reduction.
      const model::TensorInfo& e = model_->layout().find("embed");
      through_host(grads + e.offset, e.numel, opt_.tie_embedding);
    }
    if (reducer_) {
      reducer_->mark_rest_ready();  // all of it where nothing was announced
      reducer_->finish();           // the compute stream waits for the sums
    } else {
      through_host(grads, n, opt_.host_allreduce);
    }
    return grad_norm_squared(grads);
  }

  void update(double lr, double grad_scale) override {
    ML_CHECK(optimizer_, "update before start_optimizer");
    // Without ZeRO-1 this trainer updates every weight, so the AdamW pass
    // writes the bf16 working copy too; sharded, the gathered shards need
    // the separate conversion below.
    __nv_bfloat16* fused = nullptr;
    if constexpr (std::is_same_v<T, __nv_bfloat16>)
      if (!sharded_) fused = model_->params();
    optimizer_->update(model_->grads(), lr, grad_scale, fused);
    if (sharded_) {
      // Every trainer updated its shard: gather them all (equal shards of
      // the padded buffer, in trainer order).
      float* master = optimizer_->master();
      const int64_t shard = opt_.shard_size;
      if (reducer_) {
        NCCL_CHECK(ncclAllGather(master + shard * rank_, master, size_t(shard), ncclFloat32,
                                 grad_comm_, stream_));
        wait("the ZeRO-1 all-gather of the weights");
      } else {
        through_host(master, shard * size_, opt_.host_allgather);
      }
    }
    if (!fused) model_->set_params_device(optimizer_->master());
  }

  void download_grads(std::span<float> grads) override {
    ML_CHECK(int64_t(grads.size()) == model_->layout().numel(), "download_grads: wrong size");
    cuda::download_sync<float>(grads, model_->grads(), stream_);
  }
  void download_params(std::span<float> params) override {
    ML_CHECK(optimizer_, "download_params before start_optimizer");
    optimizer_->download_master(params);
  }
  void download_moments(std::span<float> m, std::span<float> v) override {
    ML_CHECK(optimizer_, "download_moments before start_optimizer");
    optimizer_->download_moments(m, v);
  }

  double peak_flops() override {
    if (peak_ <= 0) peak_ = cuda::measure_gemm_peak<T>(stream_);
    return peak_;
  }

 private:
  // This GPU's free memory before any trainer allocates the model on it:
  // every trainer (and its CUDA context) is here before any measures, and
  // all have measured before any goes on. Collective over `trainers`.
  DeviceMemoryInfo measure_memory(MPI_Comm trainers) {
    DeviceMemoryInfo m;
    const cuda::NodeRanks node = cuda::node_ranks(trainers);
    m.sharers = 0;
    for (int j = 0; j < node.local_size; ++j) m.sharers += device_of(j, devices_) == device_;
    MPI_CHECK(MPI_Barrier(trainers));
    CUDA_CHECK(cudaMemGetInfo(&m.free_bytes, &m.total_bytes));
    MPI_CHECK(MPI_Barrier(trainers));
    return m;
  }
  int offloaded_layers(float offload) const {
    return cuda::offloaded_layers(int(model_->layout().shape().n_layers), offload);
  }
  // The attention of `ring`'s CP group as the plan chose it (as the CPU
  // backend: ring, Ulysses or hybrid from RingGroup::ulysses), or null. Data
  // goes GPU to GPU over NCCL where the trainers have it (every trainer
  // decided the same in start_optimizer), on the group's communicator, else
  // through MPI.
  std::unique_ptr<cuda::DeviceAttention<T>> make_attention(const RingGroup* ring) {
    if (!ring) return nullptr;
    const int k = int(ring->members.size());
    if (ring->ulysses <= 1)
      return std::make_unique<cuda::DeviceRingAttention<T>>(
          ring->comm, ring->members, ring->me, ring->max_tokens, ring->timeout_s,
          nccl_ ? group_nccl(ring->comm, nccl_->get()) : nullptr);
    if (ring->ulysses == k)
      return std::make_unique<cuda::DeviceUlyssesAttention<T>>(ring->comm, ring->timeout_s,
                                                               group_nccl(ring->comm));
    return cuda::device_hybrid_attention<T>(ring->comm, ring->subgroup, ring->ulysses,
                                            ring->max_tokens, ring->timeout_s,
                                            group_nccl(ring->comm), group_nccl(ring->subgroup));
  }
  // The NCCL communicator of a group's MPI communicator (the same members,
  // ranks in the same sorted order) from the cache, or `fallback` where the
  // step did not prepare it; null without NCCL.
  ncclComm_t group_nccl(MPI_Comm comm, ncclComm_t fallback = nullptr) const {
    if (!groups_) return nullptr;
    const std::vector<int> members = trainers_of(comm);
    if (fallback && !groups_->contains(members)) return fallback;
    return groups_->get(members);
  }
  // The ranks in opt_.trainers (the groups' parent) of `comm`'s members.
  std::vector<int> trainers_of(MPI_Comm comm) const {
    return cuda::ranks_in_parent(comm, opt_.trainers,
                                 "a CP group with a member outside the trainers");
  }
  static typename cuda::StageLink<T>::Way way(StageTransfer what) {
    return what == StageTransfer::activations ? cuda::StageLink<T>::activations
                                              : cuda::StageLink<T>::gradients;
  }
  // A stage's input (forward) or d(output) (backward), `tokens` rows, on the
  // device: received over NCCL for `slot`, else the trainer's host values
  // (fp32) uploaded. Null when not `needed` (stage 0's forward).
  const T* stage_input(std::span<const float> host, int64_t tokens, int slot, bool needed) {
    if (!needed) return nullptr;
    const int64_t count = tokens * shape_.d_model;
    if (stage_link_) {
      ML_CHECK(host.empty() && received_slot_ == slot && int64_t(received_.size()) >= count,
               strf("pipeline slot %d: no stage transfer received for it", slot));
      received_slot_ = -1;
      return received_.data();
    }
    ML_CHECK(int64_t(host.size()) == count,
             strf("pipeline slot %d: %zu values from the next stage, not %lld", slot, host.size(),
                  (long long)count));
    received_.resize(size_t(count));
    if constexpr (std::is_same_v<T, float>) {
      cuda::upload_sync<float>(received_.data(), host, stream_);
    } else {
      staging_.resize(size_t(count));
      cuda::upload_sync<float>(staging_.data(), host, stream_);
      cuda::convert<float, T>(staging_.data(), count, received_.data(), stream_);
    }
    return received_.data();
  }
  // A stage's output (forward) or d(input) (backward), `tokens` rows: kept on
  // the device for send_stage() over NCCL (returns nothing), else in fp32 on
  // the host for the trainer's messages.
  std::vector<float> stage_result(const T* values, int64_t tokens, StageTransfer what, int slot) {
    const int64_t count = tokens * shape_.d_model;
    if (stage_link_) {
      Outgoing& o = outgoing_[{what, slot}];
      o.values = stage_link_->spare();  // a finished send's buffer, if any
      o.values.resize(size_t(count));
      o.count = count;
      CUDA_CHECK(cudaMemcpyAsync(o.values.data(), values, size_t(count) * sizeof(T),
                                 cudaMemcpyDeviceToDevice, stream_));
      return {};
    }
    std::vector<float> host(static_cast<size_t>(count));
    if constexpr (std::is_same_v<T, float>) {
      cuda::download_sync<float>(host, values, stream_);
    } else {
      staging_.resize(size_t(count));
      cuda::convert<T, float>(values, count, staging_.data(), stream_);
      cuda::download_sync<float>(host, staging_.data(), stream_);
    }
    return host;
  }
  // The TP group's communicator (tp > 1): over NCCL when every trainer has
  // its own GPU (bootstrapped over the tensor axis, as the trainers' one),
  // else through host memory over MPI. Collective over opt.tensor.
  void start_tp_comm(const OptimizerSetup& opt, bool nccl) {
    ML_CHECK(opt.tensor != MPI_COMM_NULL && opt.tp == shard_.size,
             "a tensor-parallel CUDA backend needs its TP group's communicator");
    int tp_rank = 0;
    MPI_CHECK(MPI_Comm_rank(opt.tensor, &tp_rank));
    ML_CHECK(tp_rank == shard_.rank, "the TP communicator's rank is not the model shard's");
    if (nccl) {
      tp_nccl_ = std::make_unique<cuda::NcclComm>(opt.tensor, device_);
      tp_ = cuda::nccl_tp_comm<T>(tp_nccl_->get());
    } else {
      tp_ = cuda::mpi_tp_comm<T>(opt.tensor, opt.watched);
    }
  }
  // The kernels' stream-ordered scratch (cudaMallocAsync: norm gains'
  // partials, the gradient norm, attention's tile ranges) stays in the
  // device's pool across the step's synchronizations; by default the pool
  // hands it back to the driver at each, and the next step maps it again.
  static void keep_stream_ordered_scratch(int device) {
    cudaMemPool_t pool = nullptr;
    CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device));
    uint64_t keep = UINT64_MAX;
    CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  }
  // Σ g² over the buffer (but the norm_skip ranges) and, at tp > 1, over
  // each replicated range (norm gains), whose squares every TP rank holds once.
  void start_grad_norm(const OptimizerSetup& opt) {
    // The buffer but the norm_skip ranges (the tied embedding's, which the
    // first stage counts), in pieces.
    kept_.clear();
    int64_t at = 0;
    for (const auto& [first, last] : opt.norm_skip) {
      if (first > at) kept_.emplace_back(at, first);
      at = std::max(at, last);
    }
    if (at < model_->layout().numel()) kept_.emplace_back(at, model_->layout().numel());
    parts_ = kept_.size() + (opt.tp > 1 ? opt.replicated.size() : 0);
    sum_sq_.resize(parts_);
    if (host_sum_sq_) CUDA_CHECK(cudaFreeHost(host_sum_sq_));
    CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&host_sum_sq_), parts_ * sizeof(double)));
  }
  // The global norm² of the reduced gradients (OptimizerSetup, as the CPU
  // backend): the replicated ranges counted 1/tp here, the parts of the TP
  // ranks and pipeline stages summed over the HDP rank's trainers.
  double grad_norm_squared(const float* grads) {
    const size_t kept = kept_.size();
    for (size_t i = 0; i < parts_; ++i) {
      const auto [first, last] = i < kept ? kept_[i] : opt_.replicated[i - kept];
      cuda::grad_sum_squares(grads + first, last - first, sum_sq_.data() + i, stream_);
    }
    CUDA_CHECK(cudaMemcpyAsync(host_sum_sq_, sum_sq_.data(), parts_ * sizeof(double),
                               cudaMemcpyDeviceToHost, stream_));
    wait("the gradient all-reduce over all trainers");
    double sq = 0, replicated = 0;
    for (size_t i = 0; i < parts_; ++i) (i < kept ? sq : replicated) += host_sum_sq_[i];
    if (opt_.tp == 1 && opt_.pp == 1) return sq;
    // The other TP ranks' and stages' parts (OptimizerSetup::tp_sum).
    sq = opt_.norm_share(sq, replicated);
    opt_.tp_sum(&sq);
    return sq;
  }
  // `op` (a host reduction) on `n` device floats: down, op, and up again on
  // the stream (the host staging is done with when the upload returns).
  void through_host(float* data, int64_t n, const std::function<void(std::span<float>)>& op) {
    host_.resize(size_t(n));
    cuda::download_sync<float>(host_, data, stream_);
    op(host_);
    cuda::upload_sync<float>(data, host_, stream_);
  }
  // Waits for the stream; with NCCL, with a deadline and its errors named.
  void wait(const char* what) {
    if (reducer_)
      cuda::wait_stream(stream_, grad_comm_, opt_.timeout_s, what);
    else
      CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  model::Shape shape_;
  model::TpShard shard_;
  model::StageLayers stage_;
  int64_t loss_chunk_;
  int device_, devices_;
  std::string name_;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<cuda::Transformer<T>> model_;
  double peak_ = 0;
  // The optimizer (start_optimizer).
  OptimizerSetup opt_;
  int rank_ = 0, size_ = 1;
  bool sharded_ = false;
  std::unique_ptr<cuda::DeviceAdamW> optimizer_;
  std::unique_ptr<cuda::NcclComm> nccl_;  // the trainers, when NCCL is used
  ncclComm_t grad_comm_ = nullptr;
  std::unique_ptr<cuda::GradReducer> reducer_;
  std::unique_ptr<cuda::GroupComms> groups_;  // the CP groups', with NCCL
  // The TP group (tp > 1): its NCCL communicator when used, and the model's
  // view of it.
  std::unique_ptr<cuda::NcclComm> tp_nccl_;
  std::unique_ptr<cuda::DeviceTpComm<T>> tp_;
  // Pipeline stages: each micro-batch's activations and attention from its
  // forward to its backward (by slot), sets of buffers for the next ones,
  // the values to send and the last received (NCCL), fp32 host staging (MPI).
  struct Parked {
    std::unique_ptr<cuda::DeviceAttention<T>> attention;
    typename cuda::Transformer<T>::Saved saved;
  };
  struct Outgoing {
    cuda::DeviceBuffer<T> values;
    int64_t count = 0;
  };
  std::map<int, Parked> parked_;
  std::vector<typename cuda::Transformer<T>::Saved> spare_;
  std::unique_ptr<cuda::StageLink<T>> stage_link_;  // NCCL stage transfers
  std::map<std::pair<StageTransfer, int>, Outgoing> outgoing_;
  cuda::DeviceBuffer<T> received_;
  int received_slot_ = -1;
  cuda::DeviceBuffer<float> staging_;
  // Σ g²: the kept pieces' (the buffer but norm_skip), then each replicated
  // range's (tp > 1).
  std::vector<std::pair<int64_t, int64_t>> kept_;
  cuda::DeviceBuffer<double> sum_sq_;
  size_t parts_ = 1;
  double* host_sum_sq_ = nullptr;  // pinned: the copy into it stays asynchronous
  std::vector<float> host_;        // staging of the host reductions
};

}  // namespace

}  // namespace meshloom::cuda

ML_MODULE_EXPORT meshloom::train::TrainerBackend* meshloom_cuda_make_backend(
    const meshloom::model::Shape* shape, const meshloom::train::CudaBackendSpec* spec,
    std::string* error) {
  namespace ml = meshloom;
  try {
    std::string why;
    const int n = ml::cuda::device_count(&why);
    if (n == 0) throw ml::Error("run.backend: cuda, but no GPU is visible: " + why);
    const int device = ml::cuda::device_of(spec->local_index, n);
    const ml::config::Precision precision = spec->precision;
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    const std::string name = ml::strf("GPU %d (%s, sm_%d%d), %s", device, prop.name, prop.major,
                                      prop.minor, ml::config::enum_name(precision));
    if (precision == ml::config::Precision::fp32)
      return new ml::cuda::CudaBackend<float>(*shape, *spec, device, n, name);
    return new ml::cuda::CudaBackend<__nv_bfloat16>(*shape, *spec, device, n, name);
  } catch (const std::exception& e) {
    *error = e.what();
  } catch (...) {
    *error = "the CUDA backend failed with an unknown error";
  }
  return nullptr;
}
