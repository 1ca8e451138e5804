// A trainer rank's training step: run its micro-batches forward and backward
// (ring attention for CP micro-batches on the step's group communicators;
// with parallel.pp > 1 this stage's part of them, 1F1B:
// trainer_pipeline.cpp), reduce gradients over all trainers,
// clip, and update with AdamW (optionally ZeRO-1: optimizer state sharded,
// reduce-scatter, update the shard, all-gather). The math runs in the
// backend (train/backend.hpp: the CPU, or the GPU with run.backend: cuda);
// the trainer keeps a host copy of weights and moments that is brought up to
// date for checkpoints and dumps.
//
// The loss is normalized by the global prediction count that comes with every
// batch, so loss and gradients do not depend on how the batch was split.
#pragma once

#include <mpi.h>

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ckpt/checkpoint.hpp"
#include "comm/group_comms.hpp"
#include "model/transformer.hpp"
#include "parallel/step_comms.hpp"
#include "parallel/world.hpp"
#include "train/backend.hpp"
#include "train/optimizer.hpp"
#include "train/state_file.hpp"
#include "train/step_io.hpp"
#include "train/tp_comm.hpp"

namespace meshloom::train {

class Trainer {
 public:
  // Gradients, ZeRO-1 shards and CP rings run on the data axis of `comms`
  // (which must outlive the trainer).
  Trainer(const parallel::World& w, const parallel::StepComms& comms);

  // One optimizer step on this trainer's part of the global batch. Returns what
  // it measured (loss sum, counts, timings, gradient norm). `delay` seconds are
  // slept inside the compute (an injected slow trainer).
  StepStats step(const StepInput& in, double delay = 0);

  // A forward-only pass over `in` (held-out data planned like a step): the
  // loss with no gradient, no optimizer step, the step count unchanged.
  // Bucket i of the position buckets holds the predictions made at positions
  // p (model::Batch::positions, of the predicting token) with
  // edges[i] <= p < edges[i + 1] (the last bucket: edges.back() <= p);
  // edges ascend from 0. Collective over the trainers, as step().
  EvalStats evaluate(const StepInput& in, std::span<const int64_t> position_edges);

  model::Transformer<float>& model() { return *model_; }
  int index() const { return trainer_; }  // among all trainers
  // The fp32 master weights after the last step (with run.backend: cuda
  // brought back from the device first, without the moments: step dumps).
  std::span<const float> params();
  // With run.backend: cuda, the GPU's measured dense product rate; else 0.
  double device_peak_flops() { return backend_->peak_flops(); }
  // The last step's reduced gradient, before clipping, whole on every trainer
  // (with ZeRO-1 the shards are gathered: collective over the trainers); with
  // tp > 1 or pp > 1 this rank's shard of it (its TP shard of its stage).
  std::vector<float> full_grads();
  // A buffer of this rank's layout as the whole model's (the unsharded layout
  // of checkpoints and step dumps) on TP rank 0 of stage 0, empty on the
  // others. Collective over the HDP rank's trainers; at tp = pp = 1 a copy.
  std::vector<float> whole(std::span<const float> mine) const;
  // The whole model's layout (at tp = 1 the model's own).
  const model::ParamLayout& whole_layout() const { return whole_layout_; }

  // Continues from a checkpoint (parameters, moments, step): any trainer count.
  void load(const ckpt::Checkpoint& c);
  // The state after the last step as a checkpoint, complete on trainer 0 (the
  // others return an empty one). Collective over the trainers (ZeRO-1 gathers
  // the moments). `lead_data` is what the lead sent for it.
  ckpt::Checkpoint snapshot(int64_t step, const std::string& lead_data);

  // Format 2 (checkpoint.collective): every trainer writes its own part of
  // the state into `path` (train/state_file.hpp). Collective over the
  // trainers; returns every tensor dataset's checksum on each. `wrote` as
  // for write_state.
  StateChecksums save_state(const std::string& path, const BytesWritten& wrote = {});
  // What this trainer owns of the state, copied to host memory: what a
  // background checkpoint writes (write_owned_state) while training goes on.
  OwnedState owned_state();
  // What trainer 0 adds to such a file (ckpt::finish_checkpoint): the
  // checkpoint without its tensors. `lead_data` as for snapshot().
  ckpt::Checkpoint checkpoint_rest(int64_t step, const std::string& lead_data) const;
  // Continues from a format 2 checkpoint, reading only this trainer's part
  // (any layout wrote it); `meta` is its read_checkpoint_meta(). Collective.
  void load_state(const std::string& path, const ckpt::Checkpoint& meta);

  // Starting weights (model.init), not a resume: the step, moments and data
  // stay fresh. From a weights file or a format 2 checkpoint's /model
  // (`sums`: its tensor checksums, verified), collective over the trainers:
  void load_weights(const std::string& path, const StateChecksums& sums);
  // or filled by `fill` (this trainer's layout and its parameter buffer,
  // copies of others' tensors included), then handed to the backend.
  using WeightsFill = std::function<void(const model::ParamLayout&, std::span<float>)>;
  void set_weights(const WeightsFill& fill);

 private:
  const parallel::World& w_;
  const parallel::StepComms& comms_;
  MPI_Comm comm_;            // the data axis
  int trainer_ = 0;          // index among all trainers
  int rank_ = 0, size_ = 1;  // on the data axis
  // The host copy: the CPU backend's own model, the GPU's fp32 master copy.
  int tp_ = 1, tp_rank_ = 0;
  int pp_ = 1, stage_ = 0;                  // pipeline stages (parallel.pp)
  std::vector<model::StageLayers> stages_;  // every stage's layers
  std::unique_ptr<MpiTpComm> tp_comm_;      // the model's TP collectives (tp > 1)
  comm::MpiGroupComms groups_;              // the step's CP groups, on the data axis
  model::ParamLayout whole_layout_;
  std::unique_ptr<model::Transformer<float>> model_;
  std::unique_ptr<AdamW> adam_;  // this trainer's slice of the moments
  std::unique_ptr<TrainerBackend> backend_;
  int64_t shard_begin_ = 0, shard_end_ = 0, shard_size_ = 0;
  int64_t step_ = 0;
  bool announced_ = false;      // the device was named in an acknowledgement
  std::string memory_note_;     // the device memory estimate, for that note
  bool params_stale_ = false;   // the backend has weights the host copy lacks
  bool moments_stale_ = false;  // ... and moments

  void start_optimizer();
  // The communicators of the step's CP groups (collective over the data
  // axis), with what it took, into `st`.
  void prepare_groups(const StepInput& in, StepStats& st);
  // The tied embedding's gradient (its range of the buffer) summed over
  // stages 0 and pp - 1, in place.
  void tie_embedding(std::span<float> embed_grads);
  // This trainer reports its HDP rank's tokens and loss: TP rank 0 of the
  // last stage.
  bool reports() const { return tp_rank_ == 0 && stage_ == pp_ - 1; }
  // Micro-batch `mb`'s measures into `st`: its share of the FLOPs, its
  // tokens and loss where this trainer reports them, its timing row.
  void account(const StepInput& in, const MicroInput& mb, const model::LossSum& ls, double attn_l2,
               double seconds, StepStats& st) const;
  void add_source_losses(const StepInput& in, const MicroInput& mb,
                         const std::vector<double>& token_loss, std::vector<double>& loss,
                         std::vector<int64_t>& predictions) const;
  // evaluate()'s account() of micro-batch `mb` (trainer_eval.cpp).
  void account_eval(const StepInput& in, const MicroInput& mb, const model::LossSum& ls,
                    std::span<const int64_t> edges, EvalStats& st) const;
  // The micro-batches one after another (pp = 1), or this stage's 1F1B
  // schedule of them (trainer_pipeline.cpp).
  void run_micro_batches(const StepInput& in, double scale, StepStats& st);
  void run_pipeline(const StepInput& in, double scale, StepStats& st);
  // evaluate()'s pipeline: every stage its micro-batches in slot order,
  // forward only; the last stage's losses by micro-batch (empty elsewhere).
  std::vector<model::LossSum> run_eval_pipeline(const StepInput& in);
  // Names whom a stage receive waits for (when it times out): `what` of
  // pipeline slot `slot` from stage `stage` of this pipeline.
  std::function<std::string()> stage_waiter(int stage, const char* what, int slot) const;
  RingGroup ring_of(const StepInput& in, const MicroInput& mb, double* attn_l2) const;
  void sync_host_params();         // the host's weights from the device, where stale
  void sync_host_state();          // weights and moments (checkpoints)
  StateOwner state_owner() const;  // this trainer's part of the state
};

// Compute threads of each trainer of this rank's node: run.threads, or the
// node's cores shared out over all its ranks.
int threads_per_trainer(const parallel::World& w);

}  // namespace meshloom::train
