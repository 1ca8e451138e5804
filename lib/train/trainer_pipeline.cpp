// One pipeline stage's part of a step (parallel.pp > 1): the 1F1B schedule
// of plan/pipeline/pipeline_schedule.hpp over the pipeline's slots.
//
// Every trainer of an HDP rank receives the same micro-batches, each with
// its slot (train/step_io.hpp): the pipeline runs 1F1B over slots 0..S-1,
// S = the last slot + 1, and skips empty slots on every stage alike
// (one_f_one_b_slots). A CP ring holds the same slot in each member
// pipeline, so that stage s of every member reaches the ring's forward (and
// its backward) in the same order relative to the other rings: ring
// attention runs stage by stage without deadlock (plan/pipeline/pipeline_slots.hpp).
//
// Activations go to the next stage and their gradients back with
// non-blocking sends on the pipeline axis (one tag each way; 1F1B keeps
// both streams in order, so they match without per-message tags), which
// overlap the stage's next compute. A receive waits at most run.timeout and
// then fails naming the stage, pipeline and rank it waited for (exit 3).
// A backend that moves the transfers itself (TrainerBackend::moves_stages:
// the CUDA backend over NCCL, the values staying on the device) gets the
// same calls at the same places, with the same deadline and names.
#include <map>

#include "base/clock.hpp"
#include "base/strings.hpp"
#include "comm/p2p.hpp"
#include "parallel/watchdog.hpp"
#include "plan/pipeline/pipeline_slots.hpp"
#include "train/trainer.hpp"

namespace meshloom::train {

namespace {

constexpr int kActivationTag = 1;
constexpr int kGradientTag = 2;

std::string to_bytes(std::span<const float> v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

std::vector<float> to_floats(const std::string& bytes) {
  std::vector<float> v(bytes.size() / sizeof(float));
  std::copy(bytes.begin(), bytes.end(), reinterpret_cast<char*>(v.data()));
  return v;
}

// The micro-batches' slots, checked to increase (the lead's pipeline_slots).
std::vector<int32_t> slots_of(const StepInput& in) {
  std::vector<int32_t> slots;
  for (const auto& mb : in.micro) {
    ML_CHECK(mb.slot >= 0 && (slots.empty() || mb.slot > slots.back()),
             strf("step %lld: pipeline slots must increase; %d follows %d", (long long)in.step,
                  mb.slot, slots.empty() ? -1 : slots.back()));
    slots.push_back(mb.slot);
  }
  return slots;
}

}  // namespace

// Who a wait is for, worked out only when it times out.
std::function<std::string()> Trainer::stage_waiter(int stage, const char* what, int slot) const {
  return [=, this] {
    const int peer = w_.layout.first_rank(parallel::Role::trainer) +
                     comms_.mesh().trainer_at(rank_, stage * tp_ + tp_rank_);
    return strf("%s of pipeline slot %d, sent by stage %d of pipeline %d (world rank %d),", what,
                slot, stage, rank_, peer);
  };
}

void Trainer::run_pipeline(const StepInput& in, double scale, StepStats& st) {
  const MPI_Comm comm = comms_.comm(parallel::Axis::pipeline);
  const bool first = stage_ == 0, last = stage_ == pp_ - 1;
  const std::vector<int32_t> slots = slots_of(in);
  using Transfer = TrainerBackend::StageTransfer;
  const bool on_device = backend_->moves_stages();
  const double timeout = w_.config.run.timeout;
  const size_t count = in.micro.size();
  std::vector<comm::PendingSend> sends;
  std::vector<RingGroup> rings(count);
  std::vector<double> attn_l2(count, 0.0), seconds(count, 0.0);
  std::vector<model::LossSum> losses(count);
  std::map<int, std::vector<float>> input_grads;  // last stage: d(input) from F until B
  const plan::PipeSchedule schedule = plan::one_f_one_b_slots(pp_, slots);
  for (const plan::PipeOp& op : schedule[size_t(stage_)]) {
    const int i = op.micro_batch;  // empty slots have no ops
    const MicroInput& mb = in.micro[size_t(i)];
    const model::Batch& b = mb.batch;
    if (!op.backward) {
      std::vector<float> input;
      if (!first) {
        const auto from = stage_waiter(stage_ - 1, "the activations", mb.slot);
        if (on_device)
          backend_->recv_stage(Transfer::activations, i, b.size(), timeout, from);
        else
          input = to_floats(comm::recv_bytes(stage_ - 1, kActivationTag, comm, timeout, from));
      }
      const auto start = Clock::now();
      rings[size_t(i)] = ring_of(in, mb, &attn_l2[size_t(i)]);
      const RingGroup* ring = rings[size_t(i)].members.empty() ? nullptr : &rings[size_t(i)];
      if (last) {
        losses[size_t(i)] = backend_->last_stage(b, scale, input, ring, i, &input_grads[i]);
      } else {
        std::vector<float> out = backend_->forward_stage(b, input, ring, i);
        if (on_device)
          backend_->send_stage(Transfer::activations, i);
        else
          sends.emplace_back(to_bytes(out), stage_ + 1, kActivationTag, comm);
      }
      seconds[size_t(i)] += seconds_since(start);
      continue;
    }
    std::vector<float> dx;
    if (last) {
      dx = std::move(input_grads[i]);
      input_grads.erase(i);
    } else {
      std::vector<float> d_out;
      const auto from = stage_waiter(stage_ + 1, "the gradients", mb.slot);
      if (on_device)
        backend_->recv_stage(Transfer::gradients, i, b.size(), timeout, from);
      else
        d_out = to_floats(comm::recv_bytes(stage_ + 1, kGradientTag, comm, timeout, from));
      const auto start = Clock::now();
      dx = backend_->backward_stage(d_out, i);
      seconds[size_t(i)] += seconds_since(start);
    }
    if (first) continue;
    if (on_device)
      backend_->send_stage(Transfer::gradients, i);
    else
      sends.emplace_back(to_bytes(dx), stage_ - 1, kGradientTag, comm);
  }
  {
    // Every message is received within the step: the stages run the same slots.
    parallel::WatchScope watch(
        strf("the last pipeline messages of stage %d of pipeline %d", stage_, rank_));
    sends.clear();
    backend_->finish_stage_sends(timeout);
  }
  for (size_t i = 0; i < count; ++i)
    account(in, in.micro[i], losses[i], attn_l2[i], seconds[i], st);
}

// Forward only: no 1F1B, as nothing comes back. The same order of slots on
// every stage (and so in every member pipeline of a ring) keeps ring
// attention free of deadlock, as in training. Nothing is parked.
std::vector<model::LossSum> Trainer::run_eval_pipeline(const StepInput& in) {
  const MPI_Comm comm = comms_.comm(parallel::Axis::pipeline);
  const bool first = stage_ == 0, last = stage_ == pp_ - 1;
  slots_of(in);  // checks that they increase
  using Transfer = TrainerBackend::StageTransfer;
  const bool on_device = backend_->moves_stages();
  const double timeout = w_.config.run.timeout;
  std::vector<comm::PendingSend> sends;
  std::vector<model::LossSum> losses(last ? in.micro.size() : 0);
  for (size_t i = 0; i < in.micro.size(); ++i) {
    const MicroInput& mb = in.micro[i];
    const model::Batch& b = mb.batch;
    const int slot = int(i);  // the backend's slot, as in run_pipeline()
    std::vector<float> input;
    if (!first) {
      const auto from = stage_waiter(stage_ - 1, "the evaluation activations", mb.slot);
      if (on_device)
        backend_->recv_stage(Transfer::activations, slot, b.size(), timeout, from);
      else
        input = to_floats(comm::recv_bytes(stage_ - 1, kActivationTag, comm, timeout, from));
    }
    double attn_l2 = 0;
    const RingGroup ring = ring_of(in, mb, &attn_l2);
    const RingGroup* r = ring.members.empty() ? nullptr : &ring;
    if (last) {
      losses[i] = backend_->forward_loss(b, input, r, slot, 0);  // as last_stage(): no offload
      continue;
    }
    std::vector<float> out = backend_->forward_stage_only(b, input, r, slot);
    if (on_device)
      backend_->send_stage(Transfer::activations, slot);
    else
      sends.emplace_back(to_bytes(out), stage_ + 1, kActivationTag, comm);
  }
  parallel::WatchScope watch(
      strf("the last evaluation messages of stage %d of pipeline %d", stage_, rank_));
  sends.clear();
  backend_->finish_stage_sends(timeout);
  return losses;
}

}  // namespace meshloom::train
