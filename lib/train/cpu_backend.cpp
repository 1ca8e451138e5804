#include "train/cpu_backend.hpp"

#include <algorithm>

#include "base/strings.hpp"
#include "comm/mpi_check.hpp"
#include "parallel/watchdog.hpp"
#include "train/hybrid_attention.hpp"
#include "train/ring_attention.hpp"
#include "train/ulysses_attention.hpp"

namespace meshloom::train {

namespace {

// Copies src into dst unless they are the same memory (the host copies of
// the CPU backend are its own buffers).
void copy_unless_same(std::span<const float> src, std::span<float> dst) {
  if (src.data() != dst.data()) std::copy(src.begin(), src.end(), dst.begin());
}

// The attention of `ring`'s CP group as the plan chose it (ring, Ulysses or
// hybrid), or null for none. Ulysses and hybrid take this rank's rank in the
// group's communicator as its member index: they gather every token with
// its position and sample, so any split of the tokens works.
std::unique_ptr<model::AttentionBackend<float>> make_ring(const RingGroup* ring, int threads) {
  if (!ring) return nullptr;
  model::AttnOptions attn;
  attn.threads = threads;
  const int k = int(ring->members.size());
  if (ring->ulysses <= 1)
    return std::make_unique<RingAttention>(ring->comm, ring->members, ring->me, ring->max_tokens,
                                           attn, ring->timeout_s);
  const int rank = ring->members[size_t(ring->me)];
  if (ring->ulysses == k)
    return std::make_unique<UlyssesAttention<float>>(ring->comm, rank, attn, ring->timeout_s);
  return std::make_unique<HybridAttention>(ring->comm, rank, ring->ulysses, ring->max_tokens, attn,
                                           ring->timeout_s, ring->subgroup);
}

}  // namespace

CpuBackend::CpuBackend(model::Transformer<float>* model, AdamW* adam, int64_t max_tokens)
    : model_(model), adam_(adam) {
  model_->reserve(max_tokens);
}

std::string CpuBackend::describe() const {
  return strf("the CPU, %d thread%s", model_->threads(), model_->threads() == 1 ? "" : "s");
}

void CpuBackend::start_optimizer(const OptimizerSetup& opt, std::span<const float>) {
  opt_ = opt;
  MPI_CHECK(MPI_Comm_size(opt_.trainers, &size_));
}

model::LossSum CpuBackend::forward_backward(const model::Batch& batch, double scale,
                                            const RingGroup* ring, float, bool) {
  // The model keeps the attention backend from forward to backward.
  const auto attention = make_ring(ring, model_->threads());
  return with_token_losses(model_->forward_backward(batch, scale, attention.get()));
}

model::LossSum CpuBackend::with_token_losses(model::LossSum ls) const {
  const auto losses = model_->token_losses();
  ls.token_loss.assign(losses.begin(), losses.end());
  return ls;
}

std::vector<float> CpuBackend::forward_stage(const model::Batch& batch,
                                             std::span<const float> input, const RingGroup* ring,
                                             int slot) {
  ML_CHECK(!parked_.count(slot), strf("pipeline slot %d runs forward twice", slot));
  Parked& p = parked_[slot];
  p.ring = make_ring(ring, model_->threads());
  model_->forward_stage(batch, input, p.ring.get());
  std::vector<float> out(model_->output().begin(), model_->output().end());
  if (!spare_.empty()) {
    p.acts = std::move(spare_.back());
    spare_.pop_back();
  }
  model_->swap_activations(p.acts);  // parked; the model gets spare buffers
  return out;
}

model::LossSum CpuBackend::last_stage(const model::Batch& batch, double scale,
                                      std::span<const float> input, const RingGroup* ring, int,
                                      std::vector<float>* input_grad) {
  const auto attention = make_ring(ring, model_->threads());
  const model::LossSum ls =
      with_token_losses(model_->forward_backward(batch, scale, attention.get(), input));
  if (!model_->layout().first_stage())
    input_grad->assign(model_->input_grad().begin(), model_->input_grad().end());
  return ls;
}

std::vector<float> CpuBackend::backward_stage(std::span<const float> d_output, int slot) {
  auto it = parked_.find(slot);
  ML_CHECK(it != parked_.end(), strf("pipeline slot %d runs backward before forward", slot));
  model_->swap_activations(it->second.acts);
  model_->backward_stage(d_output);
  std::vector<float> dx;
  if (!model_->layout().first_stage())
    dx.assign(model_->input_grad().begin(), model_->input_grad().end());
  spare_.push_back(std::move(it->second.acts));
  parked_.erase(it);
  return dx;
}

model::LossSum CpuBackend::forward_loss(const model::Batch& batch, std::span<const float> input,
                                        const RingGroup* ring, int, float) {
  const auto attention = make_ring(ring, model_->threads());
  return with_token_losses(model_->forward_loss(batch, attention.get(), input));
}

std::vector<float> CpuBackend::forward_stage_only(const model::Batch& batch,
                                                  std::span<const float> input,
                                                  const RingGroup* ring, int) {
  // The model's own activation buffers, overwritten: no slot is parked.
  const auto attention = make_ring(ring, model_->threads());
  model_->forward_stage(batch, input, attention.get());
  return std::vector<float>(model_->output().begin(), model_->output().end());
}

// Σ g² over [begin, end) of the flat buffer (`g` starts at `begin`), the
// replicated ranges counted 1/tp (see OptimizerSetup).
double CpuBackend::square_sum(const float* g, int64_t begin, int64_t end) const {
  auto squares = [&](int64_t from, int64_t to) {
    double sum = 0;
    for (int64_t i = from; i < to; ++i) sum += double(g[i - begin]) * double(g[i - begin]);
    return sum;
  };
  double sq = 0;
  int64_t at = begin;
  for (const auto& [first, last] : opt_.norm_skip) {  // another stage counts these
    sq += squares(at, std::min(first, end));
    at = std::max(at, last);
  }
  sq += squares(at, end);
  if (opt_.tp == 1) return sq;
  double replicated = 0;
  for (const auto& [first, last] : opt_.replicated)
    for (int64_t i = std::max(first, begin); i < std::min(last, end); ++i)
      replicated += double(g[i - begin]) * double(g[i - begin]);
  return opt_.norm_share(sq, replicated);
}

double CpuBackend::reduce_grads() {
  if (opt_.tie_embedding) {
    const model::TensorInfo& e = model_->layout().find("embed");
    opt_.tie_embedding(model_->grads().subspan(size_t(e.offset), size_t(e.numel)));
  }
  double sq = reduce_over_data();
  if (opt_.tp > 1 || opt_.pp > 1) opt_.tp_sum(&sq);
  return sq;
}

double CpuBackend::reduce_over_data() {
  const auto grads = model_->grads();
  if (!zero1()) {
    reduced_.assign(grads.begin(), grads.end());
    opt_.host_allreduce(reduced_);
    return square_sum(reduced_.data(), 0, int64_t(reduced_.size()));
  }
  // Reduce-scatter into equal shards (the buffer padded to size x shard).
  const int64_t n = int64_t(grads.size()), shard = opt_.shard_size;
  std::vector<float> padded(size_t(shard * size_), 0.0f);
  std::copy(grads.begin(), grads.end(), padded.begin());
  std::vector<float> mine(static_cast<size_t>(shard));
  parallel::WatchScope watch("the gradient reduce-scatter over all trainers");
  MPI_CHECK(MPI_Reduce_scatter_block(padded.data(), mine.data(), int(shard), MPI_FLOAT, MPI_SUM,
                                     opt_.trainers));
  double sq = square_sum(mine.data(), opt_.begin, opt_.end);
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &sq, 1, MPI_DOUBLE, MPI_SUM, opt_.trainers));
  reduced_.assign(size_t(n), 0.0f);  // only this shard is known here
  std::copy(mine.begin(), mine.begin() + (opt_.end - opt_.begin), reduced_.begin() + opt_.begin);
  return sq;
}

void CpuBackend::update(double lr, double grad_scale) {
  const auto params = model_->params();
  adam_->update(params.data() + opt_.begin, reduced_.data() + opt_.begin, lr, grad_scale);
  if (!zero1()) return;
  std::vector<float> gathered(size_t(opt_.shard_size * size_));
  std::copy(params.begin() + opt_.begin, params.begin() + opt_.end, gathered.begin() + opt_.begin);
  opt_.host_allgather(gathered);
  std::copy(gathered.begin(), gathered.begin() + int64_t(params.size()), params.begin());
}

void CpuBackend::download_grads(std::span<float> grads) {
  if (!zero1()) return copy_unless_same(reduced_, grads);
  std::vector<float> gathered(size_t(opt_.shard_size * size_), 0.0f);
  std::copy(reduced_.begin() + opt_.begin, reduced_.begin() + opt_.end,
            gathered.begin() + opt_.begin);
  opt_.host_allgather(gathered);
  std::copy(gathered.begin(), gathered.begin() + int64_t(grads.size()), grads.begin());
}

void CpuBackend::download_params(std::span<float> params) {
  copy_unless_same(model_->params(), params);
}

void CpuBackend::download_moments(std::span<float> m, std::span<float> v) {
  copy_unless_same(adam_->m(), m);
  copy_unless_same(adam_->v(), v);
}

}  // namespace meshloom::train
