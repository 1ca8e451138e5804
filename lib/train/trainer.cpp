#include "train/trainer.hpp"

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <thread>
#include <tuple>

#include "base/clock.hpp"
#include "base/log.hpp"
#include "base/math.hpp"
#include "base/strings.hpp"
#include "comm/mpi_check.hpp"
#include "parallel/watchdog.hpp"
#include "plan/cost/device_memory.hpp"
#include "plan/pipeline/pipeline.hpp"
#include "train/cpu_backend.hpp"
#include "train/state_blocks.hpp"

namespace meshloom::train {

namespace {

// Keeps the memory a step frees for the next step: a trainer allocates the
// same few buffer sizes every step, and glibc would otherwise map the larger
// ones fresh and unmap them again, so each step paid page faults and the
// kernel's zeroing (dear on a VM). Buffers over 32 MiB, glibc's limit, are
// still mapped each time. Process-wide: one trainer per process.
void keep_freed_memory_for_reuse() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's maximum
  mallopt(M_TRIM_THRESHOLD, INT_MAX);   // never give the heap's top back
}

}  // namespace

int threads_per_trainer(const parallel::World& w) {
  if (w.config.run.threads > 0) return int(w.config.run.threads);
  // Ranks share the node's cores; trainers get what is left after the others.
  int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  int on_node = 0;
  for (const auto& h : w.hosts) on_node += h == w.hosts[size_t(w.rank)];
  return std::max(1, cores / std::max(1, on_node));
}

Trainer::Trainer(const parallel::World& w, const parallel::StepComms& comms)
    : w_(w),
      comms_(comms),
      comm_(comms.comm(parallel::Axis::data)),
      trainer_(comms.rank(parallel::Axis::trainers)),
      rank_(comms.rank(parallel::Axis::data)),
      size_(comms.size(parallel::Axis::data)),
      tp_(comms.size(parallel::Axis::tensor)),
      tp_rank_(comms.rank(parallel::Axis::tensor)),
      pp_(comms.size(parallel::Axis::pipeline)),
      stage_(comms.rank(parallel::Axis::pipeline)),
      groups_(comms.comm(parallel::Axis::data)),
      whole_layout_(model::Shape::from_config(w.config.model, config::patch_dim(w.config))) {
  int64_t first = 0;
  for (int layers : plan::stage_layers_for_run(w.config)) {
    stages_.push_back({first, first + layers});
    first += layers;
  }
  ML_CHECK(int(stages_.size()) == pp_, "one layer range per pipeline stage");
  model::ModelOptions opt;
  opt.threads = threads_per_trainer(w);
  opt.loss_chunk = w.config.model.loss_chunk;
  opt.sequence_parallel = w.config.parallel.sequence_parallel;  // a no-op at tp = 1
  if (tp_ > 1) tp_comm_ = std::make_unique<MpiTpComm>(comms.comm(parallel::Axis::tensor));
  // A TP rank holds its shard of every tensor of its stage (model/params.hpp).
  model_ = std::make_unique<model::Transformer<float>>(whole_layout_.shape(), opt,
                                                       model::TpShard{tp_, tp_rank_},
                                                       tp_comm_.get(), stages_[size_t(stage_)]);
  // Every trainer draws the same parameters: the generator is keyed by the
  // seed and the element, not by the rank.
  model_->init_params(uint64_t(w.config.run.seed));
  const int64_t n = model_->layout().numel();
  if (w.config.optim.zero1) {
    shard_size_ = (n + size_ - 1) / size_;
    std::tie(shard_begin_, shard_end_) = zero_range(n, rank_, size_);
  } else {
    shard_begin_ = 0;
    shard_end_ = n;
  }
  adam_ = std::make_unique<AdamW>(w.config.optim, shard_begin_, shard_end_,
                                  model_->layout().decay_ranges());
  keep_freed_memory_for_reuse();
  if (w.config.run.backend == config::Backend::cuda) {
    // One GPU per trainer: the trainer's index among the node's trainers.
    int local = 0;
    for (int r = w.layout.first_rank(parallel::Role::trainer); r < w.rank; ++r)
      local += w.hosts[size_t(r)] == w.hosts[size_t(w.rank)];
    backend_ = make_cuda_backend(
        model_->shape(),
        CudaBackendSpec{w.config.run.precision, local, model::TpShard{tp_, tp_rank_},
                        stages_[size_t(stage_)], opt.loss_chunk});
  } else {
    // The activations of the largest micro-batch this trainer can get (at
    // most C tokens, never more than the step). On a GPU the host model only
    // keeps the weights.
    backend_ = std::make_unique<CpuBackend>(model_.get(), adam_.get(),
                                            plan::largest_micro_batch(w.config));
  }
  start_optimizer();
}

void Trainer::start_optimizer() {
  const config::OptimConfig& o = w_.config.optim;
  OptimizerSetup opt;
  opt.trainers = comm_;
  opt.all_trainers = comms_.comm(parallel::Axis::trainers);
  opt.comm = w_.config.run.gpu_comm;
  opt.beta1 = o.beta1;
  opt.beta2 = o.beta2;
  opt.eps = o.eps;
  opt.weight_decay = o.weight_decay;
  opt.decay = model_->layout().decay_ranges();
  opt.begin = shard_begin_;
  opt.end = shard_end_;
  opt.shard_size = shard_size_;
  opt.timeout_s = w_.config.run.timeout;
  opt.group_cache_bytes = w_.config.run.gpu_group_cache_mib << 20;
  opt.watched = [](const char* what, const std::function<void()>& wait) {
    parallel::WatchScope watch(what);
    wait();
  };
  opt.tp = tp_;
  opt.tensor = comms_.comm(parallel::Axis::tensor);
  for (const auto& t : model_->layout().tensors())
    if (t.split_dim < 0) opt.replicated.emplace_back(t.offset, t.offset + t.numel);
  opt.pp = pp_;
  opt.pipeline = comms_.comm(parallel::Axis::pipeline);
  // The norm's parts: every trainer of the HDP rank (its TP group at pp = 1).
  opt.tp_sum = [this](double* value) {
    parallel::WatchScope watch("the gradient norm's sum over the trainers of an HDP rank");
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, value, 1, MPI_DOUBLE, MPI_SUM,
                            comms_.comm(parallel::Axis::model)));
  };
  const model::ParamLayout& mine = model_->layout();
  if (pp_ > 1 && mine.shape().tied && (stage_ == 0 || stage_ == pp_ - 1)) {
    opt.tie_embedding = [this](std::span<float> g) { tie_embedding(g); };
    if (stage_ == pp_ - 1)
      opt.norm_skip.emplace_back(mine.embed(), mine.embed() + mine.find("embed").numel);
  }
  // The CPU path's reductions, so that GPU trainers sharing a GPU sum in
  // the same order as CPU trainers.
  opt.host_allreduce = [this](std::span<float> g) {
    parallel::WatchScope watch("the gradient all-reduce over all trainers");
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, g.data(), int(g.size()), MPI_FLOAT, MPI_SUM, comm_));
  };
  opt.host_allgather = [this](std::span<float> shards) {
    parallel::WatchScope watch("the ZeRO-1 all-gather of the weights");
    MPI_CHECK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, shards.data(), int(shard_size_),
                            MPI_FLOAT, comm_));
  };
  // The estimate against the free memory, before the model is allocated: a
  // run that cannot fit ends here, on every trainer, with what to change.
  // (The CPU's floor is checked at start-up: runtime/preflight.cpp.)
  opt.check_memory = [this](const DeviceMemoryInfo& info) {
    const plan::DeviceMemory need =
        plan::device_memory_for_run(w_.config, size_, info.nccl, stage_);
    const double free_bytes = double(info.free_bytes);
    if (double(need.total()) * info.sharers > free_bytes)
      ML_FAIL(strf("trainer %d on %s: ", trainer_, backend_->describe().c_str()) +
              plan::device_memory_error(w_.config, need, free_bytes, info.sharers));
    memory_note_ = strf(
        "device memory per trainer: about %s for micro-batches of up to %lld tokens, %s free",
        need.describe(3).c_str(), (long long)need.input.tokens, human_bytes(free_bytes).c_str());
    if (info.sharers > 1) memory_note_ += strf(" for %d trainers", info.sharers);
  };
  // The CUDA backend's start waits on the other trainers (the device memory
  // check, NCCL's bootstrap and set-up) with no deadline of its own. Nothing
  // in it opens a watch of its own (the callbacks above run during steps).
  parallel::WatchScope watch(
      "the start of the trainers' backend (device memory check, NCCL set-up)");
  backend_->start_optimizer(opt, model_->params());
}

void Trainer::sync_host_params() {
  if (!params_stale_) return;
  backend_->download_params(model_->params());
  params_stale_ = false;
}

void Trainer::sync_host_state() {
  sync_host_params();
  if (!moments_stale_) return;
  backend_->download_moments(adam_->m(), adam_->v());
  moments_stale_ = false;
}

std::span<const float> Trainer::params() {
  sync_host_params();  // step dumps: the moments may stay on the device
  return model_->params();
}

std::vector<float> Trainer::whole(std::span<const float> mine) const {
  return gather_whole(whole_layout_.shape(), stages_, comms_.comm(parallel::Axis::tensor),
                      comms_.comm(parallel::Axis::pipeline), mine);
}

void Trainer::tie_embedding(std::span<float> mine) {
  ML_CHECK(int64_t(mine.size()) == model_->layout().find("embed").numel,
           "tie_embedding: not the embedding's gradient");
  std::vector<float> other(mine.size());
  const int partner = stage_ == 0 ? pp_ - 1 : 0;
  {
    parallel::WatchScope watch(
        strf("the tied embedding's gradient from pipeline stage %d", partner));
    MPI_CHECK(MPI_Sendrecv(mine.data(), int(mine.size()), MPI_FLOAT, partner, 0, other.data(),
                           int(other.size()), MPI_FLOAT, partner, 0,
                           comms_.comm(parallel::Axis::pipeline), MPI_STATUS_IGNORE));
  }
  // Stage 0's plus the last stage's, in that order on both: the same bits.
  const float* first = stage_ == 0 ? mine.data() : other.data();
  const float* last = stage_ == 0 ? other.data() : mine.data();
  for (size_t i = 0; i < mine.size(); ++i) mine[i] = first[i] + last[i];
}

std::vector<float> Trainer::full_grads() {
  std::vector<float> g(size_t(model_->layout().numel()));
  backend_->download_grads(g);
  return g;
}

void Trainer::prepare_groups(const StepInput& in, StepStats& st) {
  std::vector<std::vector<int>> groups;
  for (const auto& g : in.groups) groups.emplace_back(g.begin(), g.end());
  parallel::WatchScope watch("the split of the step's group communicators");
  const comm::GroupCommStats host = groups_.prepare(groups);
  const comm::GroupCommStats device = backend_->prepare_groups(groups);
  st.group_hits = host.hits;
  st.group_misses = host.misses;
  st.group_split_seconds = host.split_seconds + device.split_seconds;
  st.group_device_bytes = device.held_bytes;
  st.group_device_evictions = device.evictions;
}

// The ring of a micro-batch split over a CP group, with the largest block a
// member may send: at most ceil(L / k) tokens of each sequence, or C. Not C
// alone: an offloaded piece holds more (the capacity counts its resident
// layers, plan/plan.hpp). Also the micro-batch's attention work, sum L^2/k.
RingGroup Trainer::ring_of(const StepInput& in, const MicroInput& mb, double* attn_l2) const {
  const int64_t k = int64_t(std::max<size_t>(1, mb.group.size()));
  int64_t shares = 0;
  int32_t last = -1;
  *attn_l2 = 0;
  for (const SampleRun& run : mb.runs) {
    if (run.sample == last) continue;  // a member's two chunks are one sequence
    last = run.sample;
    const int64_t L = in.samples[size_t(run.sample)].length;
    *attn_l2 += double(L) * double(L) / double(k);
    shares += ceil_div(L, k);
  }
  RingGroup ring;
  if (mb.group.size() <= 1) return ring;
  // On the group's own communicator, whose ranks follow the sorted members.
  const std::vector<int> group(mb.group.begin(), mb.group.end());
  const comm::MemberSet sorted = comm::member_set(group);
  std::vector<int> ranks;
  for (int m : group)
    ranks.push_back(int(std::lower_bound(sorted.begin(), sorted.end(), m) - sorted.begin()));
  ring = RingGroup{groups_.get(group),    ranks,     mb.member, std::max(in.capacity, shares),
                   w_.config.run.timeout, mb.ulysses};
  const int u = mb.ulysses;
  if (u > 1 && u < int(group.size())) {  // hybrid: the subgroup of consecutive group ranks
    const int first = ranks[size_t(mb.member)] / u * u;
    ring.subgroup =
        groups_.get(std::vector<int>(sorted.begin() + first, sorted.begin() + first + u));
  }
  return ring;
}

// Each prediction's loss to its sample's source (a micro-batch's tokens run
// segment by segment).
void Trainer::add_source_losses(const StepInput& in, const MicroInput& mb,
                                const std::vector<double>& token_loss, std::vector<double>& loss,
                                std::vector<int64_t>& predictions) const {
  const model::Batch& b = mb.batch;
  if (token_loss.size() != size_t(b.size())) return;  // the backend keeps none
  const size_t sources = w_.config.data.sources.size();
  loss.resize(sources, 0.0);
  predictions.resize(sources, 0);
  size_t k = 0;
  for (const SampleRun& run : mb.runs) {
    const size_t source = size_t(in.samples.at(size_t(run.sample)).source);
    for (int64_t i = 0; i < run.length; ++i, ++k)
      if (b.targets[k] >= 0) {
        loss.at(source) += token_loss[k];
        ++predictions.at(source);
      }
  }
}

void Trainer::account(const StepInput& in, const MicroInput& mb, const model::LossSum& ls,
                      double attn_l2, double seconds, StepStats& st) const {
  const model::Batch& b = mb.batch;
  // An HDP rank's trainers run the same tokens: each does about 1/(tp x pp)
  // of the FLOPs, and one reports the tokens and the loss.
  st.flops += model::model_flops(model_->shape(), b) / (tp_ * pp_);
  if (reports()) {
    st.tokens += b.size();
    st.loss_sum += ls.sum;
    st.predictions += ls.count;
    add_source_losses(in, mb, ls.token_loss, st.source_loss, st.source_predictions);
  }
  st.micro.insert(st.micro.end(), {double(b.size()), attn_l2,
                                   double(std::max<size_t>(1, mb.group.size())), seconds});
}

void Trainer::run_micro_batches(const StepInput& in, double scale, StepStats& st) {
  for (size_t i = 0; i < in.micro.size(); ++i) {
    const MicroInput& mb = in.micro[i];
    const auto mb_start = Clock::now();
    const model::Batch& b = mb.batch;
    double attn_l2 = 0;
    const RingGroup ring = ring_of(in, mb, &attn_l2);
    const model::LossSum ls = backend_->forward_backward(
        b, scale, ring.members.empty() ? nullptr : &ring, mb.offload, i + 1 == in.micro.size());
    account(in, mb, ls, attn_l2, seconds_since(mb_start), st);
  }
}

StepStats Trainer::step(const StepInput& in, double delay) {
  const auto t0 = Clock::now();
  if (delay > 0) std::this_thread::sleep_for(std::chrono::duration<double>(delay));
  StepStats st;
  st.step = in.step;
  st.trainer = trainer_;
  backend_->zero_grads();
  prepare_groups(in, st);
  if (!announced_ && trainer_ == 0)
    st.note = "trainer 0 computes on " + backend_->describe() +
              " (run.backend: " + config::enum_name(w_.config.run.backend) + ")" +
              (memory_note_.empty() ? "" : "; " + memory_note_);
  announced_ = true;
  const double scale = in.global_predictions > 0 ? 1.0 / double(in.global_predictions) : 0;
  if (pp_ > 1)
    run_pipeline(in, scale, st);
  else
    run_micro_batches(in, scale, st);
  st.compute_seconds = seconds_since(t0);
  // Gradients over all trainers; the norm is taken before clipping.
  st.grad_norm = std::sqrt(backend_->reduce_grads());
  const double lr = learning_rate(w_.config.optim, step_, w_.config.run.steps);
  backend_->update(lr, clip_scale(st.grad_norm, w_.config.optim.grad_clip));
  params_stale_ = moments_stale_ = true;  // the backend's, brought back when asked
  ++step_;
  st.step_seconds = seconds_since(t0);
  return st;
}

}  // namespace meshloom::train
