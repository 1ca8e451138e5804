// The CPU backend (train/backend.hpp): the trainer's host model with OpenMP
// and OpenBLAS. Its host copies are the model and the optimizer themselves,
// so downloads cost nothing. Gradients are summed over the trainers with
// MPI: an all-reduce, or with ZeRO-1 (OptimizerSetup::shard_size > 0) a
// reduce-scatter into equal shards, each trainer updating its shard, and an
// all-gather of the weights.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "train/backend.hpp"
#include "train/optimizer.hpp"

namespace meshloom::train {

class CpuBackend final : public TrainerBackend {
 public:
  // `model` and `adam` (this trainer's slice of the optimizer state) belong
  // to the trainer and outlive the backend. The model's activations are
  // reserved for micro-batches of `max_tokens`, so that none is first met
  // mid-run.
  CpuBackend(model::Transformer<float>* model, AdamW* adam, int64_t max_tokens);

  std::string describe() const override;
  void start_optimizer(const OptimizerSetup& opt, std::span<const float> params) override;
  // The trainer loaded them into the model and the optimizer already.
  void load_state(std::span<const float>, std::span<const float>, std::span<const float>,
                  int64_t) override {}
  void zero_grads() override { model_->zero_grads(); }
  model::LossSum forward_backward(const model::Batch& batch, double scale,
                                  const RingGroup* ring = nullptr, float offload = 0,
                                  bool last = false) override;
  std::vector<float> forward_stage(const model::Batch& batch, std::span<const float> input,
                                   const RingGroup* ring, int slot) override;
  model::LossSum last_stage(const model::Batch& batch, double scale, std::span<const float> input,
                            const RingGroup* ring, int slot,
                            std::vector<float>* input_grad) override;
  std::vector<float> backward_stage(std::span<const float> d_output, int slot) override;
  model::LossSum forward_loss(const model::Batch& batch, std::span<const float> input,
                              const RingGroup* ring, int slot, float offload) override;
  std::vector<float> forward_stage_only(const model::Batch& batch, std::span<const float> input,
                                        const RingGroup* ring, int slot) override;
  double reduce_grads() override;
  void update(double lr, double grad_scale) override;
  // With ZeRO-1 the shards are gathered: collective over the trainers.
  void download_grads(std::span<float> grads) override;
  void download_params(std::span<float> params) override;
  void download_moments(std::span<float> m, std::span<float> v) override;
  int64_t optimizer_steps() const override { return adam_->step(); }
  double peak_flops() override { return 0; }  // measured per node by the job

 private:
  bool zero1() const { return opt_.shard_size > 0; }
  // `ls` with the model's per-token losses of its last forward.
  model::LossSum with_token_losses(model::LossSum ls) const;
  // The data axis's reduction of the gradients and its share of the norm².
  double reduce_over_data();
  double square_sum(const float* g, int64_t begin, int64_t end) const;

  using Activations = model::Transformer<float>::Activations;
  // A micro-batch between its forward and backward on this stage: its
  // activations and its ring (which the model uses again in backward).
  struct Parked {
    Activations acts;
    std::unique_ptr<model::AttentionBackend<float>> ring;
  };

  model::Transformer<float>* model_;
  AdamW* adam_;
  std::map<int, Parked> parked_;    // by slot
  std::vector<Activations> spare_;  // sets whose buffers the next forwards reuse
  OptimizerSetup opt_;
  int size_ = 1;
  std::vector<float> reduced_;  // the last step's reduced gradient (this shard with ZeRO-1)
};

}  // namespace meshloom::train
