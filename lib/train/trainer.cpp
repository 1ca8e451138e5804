#include "train/trainer.hpp"

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <map>
#include <thread>

#include "base/bytes.hpp"
#include "base/log.hpp"
#include "base/strings.hpp"
#include "comm/mpi_check.hpp"
#include "plan/device_memory.hpp"
#include "parallel/watchdog.hpp"
#include "train/ring_attention.hpp"

namespace meshloom {

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

model::Batch to_model_batch(const proto::MicroBatch& mb) {
  model::Batch b;
  b.tokens = mb.tokens;
  b.targets = mb.targets;
  b.positions = mb.positions;
  b.samples.reserve(mb.tokens.size());
  for (const auto& seg : mb.segments)
    b.samples.insert(b.samples.end(), size_t(seg.length), seg.sample);
  return b;
}

double Trainer::flops(const model::Shape& s, int64_t tokens, double attn_pairs) {
  const double d = double(s.d_model);
  const double per_token_layer =
      2.0 * (d * double(s.qkv_dim()) + double(s.q_dim()) * d + 3.0 * d * double(s.ffn_dim));
  const double head = 2.0 * d * double(s.vocab);
  const double attn = 4.0 * double(s.head_dim) * double(s.n_heads) * attn_pairs;  // QKᵀ and PV
  const double forward =
      double(tokens) * (per_token_layer * double(s.n_layers) + head) + attn * double(s.n_layers);
  return 3.0 * forward;  // backward costs twice the forward
}

static int threads_per_trainer(const World& w) {
  if (w.config.run.threads > 0) return int(w.config.run.threads);
  // Ranks share the node's cores; trainers get what is left after the others.
  int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  int on_node = 0;
  for (const auto& h : w.hosts) on_node += h == w.hosts[size_t(w.rank)];
  return std::max(1, cores / std::max(1, on_node));
}

Trainer::Trainer(const World& w, MPI_Comm trainers) : w_(w), comm_(trainers) {
  MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  MPI_CHECK(MPI_Comm_size(comm_, &size_));
  model::ModelOptions opt;
  opt.threads = threads_per_trainer(w);
  model_ =
      std::make_unique<model::Transformer<float>>(model::Shape::from_config(w.config.model), opt);
  // Every trainer draws the same parameters: the generator is keyed by the
  // seed and the element, not by the rank.
  model_->init_params(uint64_t(w.config.run.seed));
  const int64_t n = model_->layout().numel();
  if (w.config.optim.zero1) {
    shard_size_ = (n + size_ - 1) / size_;
    shard_begin_ = std::min<int64_t>(n, shard_size_ * rank_);
    shard_end_ = std::min<int64_t>(n, shard_begin_ + shard_size_);
  } else {
    shard_begin_ = 0;
    shard_end_ = n;
  }
  adam_ = std::make_unique<train::AdamW>(w.config.optim, shard_begin_, shard_end_,
                                         model_->layout().decay_ranges());
  if (w.config.run.backend == "cuda") {
    // One GPU per trainer: the trainer's index among the node's trainers.
    int local = 0;
    for (int r = w.layout.first_rank(Role::trainer); r < w.rank; ++r)
      local += w.hosts[size_t(r)] == w.hosts[size_t(w.rank)];
    device_ = make_cuda_model(model_->shape(), w.config.run.precision, local);
    start_device_optimizer();
  }
  keep_freed_memory_for_reuse();
  // The CPU model's activations, for the largest micro-batch this trainer can
  // get (at most C tokens, never more than the step), so that none is first
  // met mid-run. On the GPU the host model only keeps the weights.
  if (!device_) model_->reserve(std::min(w.config.plan.capacity, w.config.data.tokens_per_step));
}

void Trainer::start_device_optimizer() {
  const config::OptimConfig& o = w_.config.optim;
  DeviceOptimizer opt;
  opt.trainers = comm_;
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
  // The CPU path's reductions, so that GPU trainers sharing a GPU sum in
  // the same order as CPU trainers.
  opt.host_allreduce = [this](std::span<float> g) {
    WatchScope watch("the gradient all-reduce over all trainers");
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, g.data(), int(g.size()), MPI_FLOAT, MPI_SUM, comm_));
  };
  opt.host_allgather = [this](std::span<float> shards) {
    WatchScope watch("the ZeRO-1 all-gather of the weights");
    MPI_CHECK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, shards.data(), int(shard_size_),
                            MPI_FLOAT, comm_));
  };
  // The estimate against the free memory, before the model is allocated: a
  // run that cannot fit ends here, on every trainer, with what to change.
  opt.check_memory = [this](const DeviceMemoryInfo& info) {
    const plan::DeviceMemory need = plan::device_memory_for_run(w_.config, size_, info.nccl);
    const double free_bytes = double(info.free_bytes);
    if (double(need.total()) * info.sharers > free_bytes)
      ML_FAIL(strf("trainer %d on %s: ", rank_, device_->describe().c_str()) +
              plan::device_memory_error(w_.config, need, free_bytes, info.sharers));
    memory_note_ = strf(
        "device memory per trainer: about %s for micro-batches of up to %lld tokens, %s free",
        need.describe(3).c_str(), (long long)need.input.tokens, human_bytes(free_bytes).c_str());
    if (info.sharers > 1) memory_note_ += strf(" for %d trainers", info.sharers);
  };
  device_->start_optimizer(opt, model_->params());
}

void Trainer::sync_host_params() {
  if (!device_ || !params_stale_) return;
  device_->download_params(model_->params());
  params_stale_ = false;
}

void Trainer::sync_host_state() {
  sync_host_params();
  if (!device_ || !moments_stale_) return;
  device_->download_moments(adam_->m(), adam_->v());
  moments_stale_ = false;
}

std::span<const float> Trainer::params() {
  sync_host_params();  // step dumps: the moments may stay on the device
  return model_->params();
}

std::vector<float> Trainer::full_grads() {
  if (device_) {  // the reduction left the whole sum on every trainer
    std::vector<float> g(size_t(model_->layout().numel()));
    device_->download_grads(g);
    return g;
  }
  if (!w_.config.optim.zero1) return reduced_;
  std::vector<float> gathered(size_t(shard_size_ * size_), 0.0f);
  std::copy(reduced_.begin() + shard_begin_, reduced_.begin() + shard_end_,
            gathered.begin() + shard_size_ * rank_);
  MPI_CHECK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, gathered.data(), int(shard_size_),
                          MPI_FLOAT, comm_));
  gathered.resize(reduced_.size());
  return gathered;
}

void Trainer::load(const ckpt::Checkpoint& c) {
  // The checkpoint lists tensors by name (in HDF5's order): place each by name.
  std::map<std::string, const model::TensorInfo*> by_name;
  for (const auto& t : model_->layout().tensors()) by_name[t.name] = &t;
  bool same = c.tensors.size() == by_name.size();
  for (const auto& t : c.tensors)
    same = same && by_name.count(t.name) && by_name[t.name]->numel == t.numel;
  if (!same)
    throw Error("the checkpoint's model (" + std::to_string(c.tensors.size()) +
                " tensors) does not match the model config: same model section needed");
  auto params = model_->params();
  std::vector<float> m(params.size()), v(params.size());
  for (const auto& t : c.tensors) {
    const model::TensorInfo& info = *by_name[t.name];
    std::copy(c.params.begin() + t.offset, c.params.begin() + t.offset + t.numel,
              params.begin() + info.offset);
    std::copy(c.m.begin() + t.offset, c.m.begin() + t.offset + t.numel, m.begin() + info.offset);
    std::copy(c.v.begin() + t.offset, c.v.begin() + t.offset + t.numel, v.begin() + info.offset);
  }
  std::copy(m.begin() + shard_begin_, m.begin() + shard_end_, adam_->m().begin());
  std::copy(v.begin() + shard_begin_, v.begin() + shard_end_, adam_->v().begin());
  adam_->set_step(c.adam_step);
  step_ = c.step + 1;
  if (device_) device_->load_state(model_->params(), adam_->m(), adam_->v(), c.adam_step);
  params_stale_ = moments_stale_ = false;
}

ckpt::Checkpoint Trainer::snapshot(int64_t step, const std::string& lead_data) {
  sync_host_state();
  ckpt::Checkpoint c;
  std::vector<float> m(adam_->m()), v(adam_->v());
  if (w_.config.optim.zero1) {
    // Gather the moment shards (padded to equal size) on trainer 0.
    auto gather = [&](std::vector<float>& part) {
      std::vector<float> padded(size_t(shard_size_), 0.0f);
      std::copy(part.begin(), part.end(), padded.begin());
      std::vector<float> all(rank_ == 0 ? size_t(shard_size_ * size_) : 0);
      MPI_CHECK(MPI_Gather(padded.data(), int(shard_size_), MPI_FLOAT, all.data(), int(shard_size_),
                           MPI_FLOAT, 0, comm_));
      all.resize(rank_ == 0 ? size_t(model_->layout().numel()) : 0);
      part = std::move(all);
    };
    gather(m);
    gather(v);
  }
  if (rank_ != 0) return c;
  c.step = step;
  c.trainers = size_;
  c.seed = w_.config.run.seed;
  c.config = w_.config_text;
  for (const auto& t : model_->layout().tensors())
    c.tensors.push_back({t.name, t.shape, t.offset, t.numel});
  auto params = model_->params();
  c.params.assign(params.begin(), params.end());
  c.m = std::move(m);
  c.v = std::move(v);
  c.adam_step = adam_->step();
  ByteReader r(lead_data, "checkpoint data from the lead");
  c.plane = r.get_string();
  c.lengths_full = r.get<uint8_t>() != 0;
  c.lengths_base = r.get_string();
  const uint64_t sources = r.get<uint64_t>();
  for (uint64_t i = 0; i < sources; ++i) {
    ckpt::SourceLengths sl;
    sl.source = r.get_string();
    sl.docs = r.get_vector<int64_t>();
    sl.lengths = r.get_vector<int64_t>();
    c.lengths.push_back(std::move(sl));
  }
  return c;
}

int64_t Trainer::optimizer_bytes() const {
  return 2 * (shard_end_ - shard_begin_) * int64_t(sizeof(float));
}

proto::Ack Trainer::step(const proto::Batch& batch, double delay) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  if (delay > 0) std::this_thread::sleep_for(std::chrono::duration<double>(delay));
  proto::Ack ack;
  ack.step = batch.step;
  ack.trainer = rank_;
  if (device_) {
    device_->zero_grads();
    if (!announced_ && rank_ == 0)
      ack.note =
          "trainer 0 computes on " + device_->describe() + " (run.backend: cuda); " + memory_note_;
    announced_ = true;
  } else {
    model_->zero_grads();
  }
  const double scale = batch.global_predictions > 0 ? 1.0 / double(batch.global_predictions) : 0;
  const model::Shape& shape = model_->shape();
  model::AttnOptions attn;
  attn.threads = model_->threads();
  for (size_t i = 0; i < batch.micro.size(); ++i) {
    const proto::MicroBatch& mb = batch.micro[i];
    const auto mb_start = clock::now();
    model::Batch b = to_model_batch(mb);
    const int64_t k = int64_t(std::max<size_t>(1, mb.group.size()));
    double attn_l2 = 0;
    // The largest block a ring member may send: at most ceil(L / k) tokens of
    // each sequence, or C. Not C alone: an offloaded piece holds more (the
    // capacity counts its resident layers, plan/plan.hpp).
    int64_t shares = 0;
    int32_t last = -1;
    for (const auto& seg : mb.segments) {
      if (seg.sample == last) continue;  // a member's two chunks are one sequence
      last = seg.sample;
      const int64_t L = batch.samples[size_t(seg.sample)].length;
      attn_l2 += double(L) * double(L) / double(k);
      shares += (L + k - 1) / k;
    }
    const int64_t max_block = std::max(w_.config.plan.capacity, shares);
    double pairs = 0;
    for (int32_t p : mb.positions) pairs += double(p) + 1.0;
    ack.flops += flops(shape, b.size(), pairs);
    ack.tokens += b.size();
    model::LossSum ls;
    if (device_) {
      RingGroup ring;
      if (mb.group.size() > 1)
        ring = RingGroup{comm_, std::vector<int>(mb.group.begin(), mb.group.end()), mb.member,
                         max_block, w_.config.run.timeout};
      ls = device_->forward_backward(b, scale, mb.group.size() > 1 ? &ring : nullptr, mb.offload,
                                     i + 1 == batch.micro.size());
    } else if (mb.group.size() > 1) {
      std::vector<int> group(mb.group.begin(), mb.group.end());
      train::RingAttention ring(comm_, group, mb.member, max_block, attn, w_.config.run.timeout);
      ls = model_->forward(b, &ring);
      model_->backward(scale);
    } else {
      ls = model_->forward(b);
      model_->backward(scale);
    }
    ack.loss_sum += ls.sum;
    ack.predictions += ls.count;
    ack.micro.insert(ack.micro.end(),
                     {double(b.size()), attn_l2, double(k),
                      std::chrono::duration<double>(clock::now() - mb_start).count()});
  }
  const auto t1 = clock::now();
  ack.compute_seconds = std::chrono::duration<double>(t1 - t0).count();

  const double lr = train::learning_rate(w_.config.optim, step_, w_.config.run.steps);
  if (device_) {
    // Reduction, norm and AdamW on the device; the host copy is stale now.
    ack.grad_norm = std::sqrt(device_->reduce_grads());
    device_->update(lr, train::clip_scale(ack.grad_norm, w_.config.optim.grad_clip));
    adam_->set_step(adam_->step() + 1);  // the device's count, kept for checkpoints
    params_stale_ = moments_stale_ = true;
    ++step_;
    ack.step_seconds = std::chrono::duration<double>(clock::now() - t0).count();
    return ack;
  }

  // Gradients over all trainers; the norm is taken before clipping.
  auto grads = model_->grads();
  auto params = model_->params();
  const int64_t n = int64_t(grads.size());
  double sq = 0;
  if (!w_.config.optim.zero1) {
    reduced_.assign(grads.begin(), grads.end());
    WatchScope watch("the gradient all-reduce over all trainers");
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, reduced_.data(), int(n), MPI_FLOAT, MPI_SUM, comm_));
    for (float g : reduced_) sq += double(g) * double(g);
  } else {
    // Reduce-scatter into equal shards (the buffer padded to size x shard).
    std::vector<float> padded(size_t(shard_size_ * size_), 0.0f);
    std::copy(grads.begin(), grads.end(), padded.begin());
    std::vector<float> mine(static_cast<size_t>(shard_size_));
    WatchScope watch("the gradient reduce-scatter over all trainers");
    MPI_CHECK(MPI_Reduce_scatter_block(padded.data(), mine.data(), int(shard_size_), MPI_FLOAT,
                                       MPI_SUM, comm_));
    for (int64_t i = 0; i < shard_end_ - shard_begin_; ++i)
      sq += double(mine[size_t(i)]) * mine[size_t(i)];
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &sq, 1, MPI_DOUBLE, MPI_SUM, comm_));
    reduced_.assign(size_t(n), 0.0f);  // only this shard is known here
    std::copy(mine.begin(), mine.begin() + (shard_end_ - shard_begin_),
              reduced_.begin() + shard_begin_);
  }
  ack.grad_norm = std::sqrt(sq);
  const double clip = train::clip_scale(ack.grad_norm, w_.config.optim.grad_clip);
  adam_->update(params.data() + shard_begin_, reduced_.data() + shard_begin_, lr, clip);
  if (w_.config.optim.zero1) {
    std::vector<float> gathered(size_t(shard_size_ * size_));
    std::copy(params.begin() + shard_begin_, params.begin() + shard_end_,
              gathered.begin() + shard_begin_);
    MPI_CHECK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, gathered.data(), int(shard_size_),
                            MPI_FLOAT, comm_));
    std::copy(gathered.begin(), gathered.begin() + n, params.begin());
  }
  ++step_;
  ack.step_seconds = std::chrono::duration<double>(clock::now() - t0).count();
  return ack;
}

}  // namespace meshloom
