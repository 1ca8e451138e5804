// The trainer's backend: where a trainer's model lives and its step runs.
// Forward and backward of each micro-batch, the gradient reduction over all
// trainers and the AdamW step all run in the backend; the Trainer
// (train/trainer.hpp) only drives it and keeps host copies of the weights and
// moments, brought up to date when it asks (checkpoints, step dumps).
//
//   CpuBackend (train/cpu_backend.hpp)   the host model with OpenMP and
//       OpenBLAS; gradients summed with MPI on the trainers' communicator.
//       Its host copies are the model itself.
//   CudaBackend (kernels/host/model/cuda_backend.cpp)   a GPU per trainer: the
//       fp32 master weights, the moments and the gradients stay on the
//       device, and nothing of the model's size crosses to the host during a
//       step. Gradients are summed by NCCL when every trainer has its own GPU
//       (in buckets, started during the last micro-batch's backward), else
//       through host memory with the caller's MPI reduction
//       (OptimizerSetup::host_allreduce), which lets trainers share a GPU.
//
// make_cuda_backend() loads the CUDA backend, the module libmeshloom_cuda.so
// (kernels/host/module.hpp), on first use (lib/train/cuda_module.cpp); in a CPU-only
// build it fails. This header is the module's whole view of lib/train.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/check.hpp"
#include "comm/member_sets.hpp"
#include "config/config.hpp"
#include "model/batch.hpp"
#include "model/params.hpp"
#include "model/transformer.hpp"

namespace meshloom::train {

// The CP group of a micro-batch (as for RingAttention): members'
// ranks in `comm` in ring order, this rank's index, the largest block any
// member holds (C, or more for offloaded pieces: Trainer::step), and the
// deadline of every transfer. `ulysses`: the plan's Ulysses degree u (1: a
// ring; the group size: Ulysses attention; else hybrid),
// whose all-to-alls run on `comm` with this rank as `comm`'s rank.
struct RingGroup {
  MPI_Comm comm = MPI_COMM_NULL;
  std::vector<int> members;
  int me = 0;
  int64_t max_tokens = 0;
  double timeout_s = 300;
  int ulysses = 1;
  // Hybrid (1 < ulysses < members): this member's Ulysses subgroup, prepared
  // with the step's groups (roles/step_placer.cpp's step_groups); null: split on
  // the spot.
  MPI_Comm subgroup = MPI_COMM_NULL;
};

// What the device says about its memory before it allocates anything of the
// model's size (OptimizerSetup::check_memory).
struct DeviceMemoryInfo {
  size_t free_bytes = 0;  // cudaMemGetInfo's, before any trainer allocated the model
  size_t total_bytes = 0;
  int sharers = 1;    // trainers on this GPU, this one included
  bool nccl = false;  // rings and gradients go over NCCL
};

// How the optimizer runs on the device: the trainer's settings, handed over
// once by start_optimizer().
struct OptimizerSetup {
  // The trainers gradients are summed over (the data axis: all trainers at
  // tp = 1); rank = the trainer's index there. Rings run on it too.
  MPI_Comm trainers = MPI_COMM_NULL;
  // Every trainer (Axis::trainers), whatever tp: who shares a GPU, whether
  // NCCL can be used. `trainers` where null.
  MPI_Comm all_trainers = MPI_COMM_NULL;
  // run.gpu_comm: nccl (fails with the reason when a trainer has no GPU of
  // its own), mpi (through host memory), auto (nccl where it can).
  config::GpuComm comm = config::GpuComm::automatic;
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.1;
  std::vector<std::pair<int64_t, int64_t>> decay;  // [first, last) ranges with weight decay
  // This trainer's slice of the flat buffer: its optimizer state (ZeRO-1),
  // else [0, numel). Slices are shard_size long (the last one shorter).
  int64_t begin = 0, end = 0, shard_size = 0;
  double timeout_s = 300;  // of every wait on the other trainers
  // Runs a blocking MPI call of the backend's own (the CUDA TP sums through
  // host memory) under the watchdog, which names `what` past run.timeout.
  std::function<void(const char* what, const std::function<void()>& wait)> watched;
  // run.gpu_group_cache_mib: what the NCCL communicators of CP groups may hold.
  int64_t group_cache_bytes = int64_t(1) << 30;
  // The host reductions, when not over NCCL: sum over the trainers in place;
  // all-gather of equal shards of shard_size elements (ZeRO-1).
  std::function<void(std::span<float>)> host_allreduce;
  std::function<void(std::span<float>)> host_allgather;
  // Called once, on every trainer, once the transport is chosen and before
  // the weights, gradients and optimizer state are allocated: fails (fatal)
  // when the run cannot fit (plan/cost/device_memory.hpp).
  std::function<void(const DeviceMemoryInfo&)> check_memory;
  // Tensor parallelism (tp > 1): the flat buffer is this TP rank's shard.
  // Gradients of the replicated tensors (`replicated` ranges: norm gains) are
  // the same on every rank of the group, so the global norm² counts them
  // 1/tp on each rank, and the ranks' parts are summed over the group with
  // `tp_sum`. `tensor`: the TP group (rank = TP rank), over which the CUDA
  // backend builds its device TP communicator.
  int tp = 1;
  MPI_Comm tensor = MPI_COMM_NULL;
  std::vector<std::pair<int64_t, int64_t>> replicated;
  std::function<void(double*)> tp_sum;
  // Pipeline parallelism (pp > 1): the buffer is this stage's tensors, and
  // tp_sum sums over the HDP rank's tp x pp trainers. With tied embeddings
  // stages 0 and pp - 1 both hold the embedding: `tie_embedding` (set on
  // those two) sums its gradient (the `embed` tensor's range, in place)
  // over them before the reduction, and the last stage leaves it out of the
  // norm (`norm_skip`). `pipeline`: the pipeline axis (rank = stage), over
  // which a backend that moves the stage transfers itself builds its
  // communicator (TrainerBackend::moves_stages).
  int pp = 1;
  MPI_Comm pipeline = MPI_COMM_NULL;
  std::function<void(std::span<float>)> tie_embedding;
  std::vector<std::pair<int64_t, int64_t>> norm_skip;
  // This rank's part of the global norm²: Σ g² over its buffer, with the
  // replicated ranges' Σ g² (`replicated_sq`) counted 1/tp.
  double norm_share(double all_sq, double replicated_sq) const {
    return all_sq - replicated_sq * (1.0 - 1.0 / tp);
  }
};

class TrainerBackend {
 public:
  virtual ~TrainerBackend() = default;
  // One line for logs: the device or the CPU threads, the precision and,
  // after start_optimizer(), how gradients are reduced.
  virtual std::string describe() const = 0;
  // Allocates the model and takes the optimizer and the fp32 master weights
  // (ParamLayout order) to the device, with fresh moments, after
  // opt.check_memory. Collective over opt.trainers.
  virtual void start_optimizer(const OptimizerSetup& opt, std::span<const float> params) = 0;
  // Weights, this trainer's moments and the step count from a checkpoint.
  virtual void load_state(std::span<const float> params, std::span<const float> m,
                          std::span<const float> v, int64_t step) = 0;
  virtual void zero_grads() = 0;
  // The step's CP groups and hybrid subgroups (ranks of OptimizerSetup::
  // trainers, roles/step_placer.cpp's step_groups), at the start of every step: the CUDA
  // backend splits their NCCL communicators (cached per member set, the same
  // LRU and capacity as the MPI ones, bounded by OptimizerSetup::
  // group_cache_bytes too). Collective over the trainers, in the same order
  // everywhere. Returns what it did (the step's metrics add its seconds to
  // the MPI ones' and report its memory).
  virtual comm::GroupCommStats prepare_groups(const std::vector<std::vector<int>>& /*groups*/) {
    return {};
  }
  // Forward, then backward with `scale` (the CPU model's forward() and
  // backward(scale) together); gradients accumulate on the device. With a
  // ring, attention runs over the CP group as RingGroup::ulysses says (on the
  // GPU: kernels/host/model/device_ring_attention, device_ulysses_attention).
  // `offload` is the plan's ratio r for the micro-batch: r·(layers − 2) layers'
  // activations wait in host memory between forward and backward. `last`:
  // this step's last micro-batch here, whose backward may start reducing.
  // Returns when the micro-batch's work is done on the device.
  virtual model::LossSum forward_backward(const model::Batch& batch, double scale,
                                          const RingGroup* ring = nullptr, float offload = 0,
                                          bool last = false) = 0;
  // Evaluation (Trainer::evaluate): forward only. No gradient is computed
  // or touched, nothing is kept for a backward, and the activations go into
  // the buffers training uses. forward_loss() runs the whole model (pp = 1)
  // or the last stage on `input` (as last_stage(); with moves_stages() empty,
  // received for `slot`) through the loss, with its per-token losses
  // (LossSum::token_loss); `offload` as for forward_backward().
  virtual model::LossSum forward_loss(const model::Batch& batch, std::span<const float> input,
                                      const RingGroup* ring, int slot, float offload) = 0;
  // A stage other than the last: its output for the next stage (as
  // forward_stage(), with moves_stages() kept under `slot` for
  // send_stage()), nothing parked.
  virtual std::vector<float> forward_stage_only(const model::Batch&, std::span<const float>,
                                                const RingGroup*, int) {
    throw Error(kNoStages);
  }
  // Pipeline parallelism (parallel.pp > 1): a stage's part of a
  // micro-batch, as a 1F1B schedule runs it.
  // forward_stage() runs the stage's layers on `input` (the stage before's
  // output; ignored on stage 0), keeps the activations under `slot` until
  // backward_stage(slot), and returns the output for the next stage. The
  // last stage runs last_stage(): forward, loss and backward at once, with
  // d(input) for the stage before in *input_grad (`slot`'s, sent when the
  // schedule runs its backward). backward_stage() takes
  // d(output) and returns d(input) (empty on stage 0). The defaults fail
  // (defined here: the CUDA module sees only this header).
  //
  // Where moves_stages() (the CUDA backend with NCCL: one GPU per trainer),
  // the stage transfers stay on the device: the trainer calls recv_stage()
  // before the op that needs the values, and then passes an empty `input` or
  // `d_output`; the ops return nothing (nor fill *input_grad) and keep their
  // result under the slot, which send_stage() sends once the trainer's
  // schedule says so; finish_stage_sends() waits for every send at the end
  // of the step. Else the trainer moves the returned host vectors over MPI.
  virtual std::vector<float> forward_stage(const model::Batch&, std::span<const float>,
                                           const RingGroup*, int) {
    throw Error(kNoStages);
  }
  virtual model::LossSum last_stage(const model::Batch&, double, std::span<const float>,
                                    const RingGroup*, int, std::vector<float>*) {
    throw Error(kNoStages);
  }
  virtual std::vector<float> backward_stage(std::span<const float>, int) { throw Error(kNoStages); }
  enum class StageTransfer {
    activations,  // forward: to the next stage
    gradients,    // backward: d(input), to the stage before
  };
  virtual bool moves_stages() const { return false; }
  // Receives slot's `tokens` rows of `what` (activations from the stage
  // before, gradients from the stage after); waits at most `timeout_s`, then
  // fails (exit 3) with `waiting_for` (worked out only then: who it waited for).
  virtual void recv_stage(StageTransfer, int, int64_t, double,
                          const std::function<std::string()>&) {
    throw Error(kNoStages);
  }
  // Starts sending slot's `what`, which its last op kept; asynchronous.
  virtual void send_stage(StageTransfer, int) { throw Error(kNoStages); }
  // Waits (at most `timeout_s`) until every send of the step is done.
  virtual void finish_stage_sends(double) {}
  static constexpr const char* kNoStages = "this backend runs no pipeline stages";
  // Sums the step's gradients over all trainers (collective) and returns the
  // sum of squares of the result: the global norm², before clipping.
  virtual double reduce_grads() = 0;
  // One AdamW step on this trainer's slice with `lr` and the clip factor;
  // with ZeRO-1 the slices are then all-gathered (collective). The working
  // weights follow.
  virtual void update(double lr, double grad_scale) = 0;
  // Host copies: the reduced gradients of the last step, the master weights,
  // this trainer's moments (slice-sized).
  virtual void download_grads(std::span<float> grads) = 0;
  virtual void download_params(std::span<float> params) = 0;
  virtual void download_moments(std::span<float> m, std::span<float> v) = 0;
  // AdamW updates done so far (its bias correction; checkpoints keep it).
  virtual int64_t optimizer_steps() const = 0;
  // The device's dense product rate in the model's precision (FLOP/s),
  // measured once with a large cuBLAS product: the roofline of MFU. 0 where
  // the job measures it per node instead (the CPU: runtime/gemm_peak.hpp).
  virtual double peak_flops() = 0;
};

// What the CUDA backend is made with.
struct CudaBackendSpec {
  // bf16 (bf16 weights and activations, fp32 accumulation) or fp32.
  config::Precision precision = config::Precision::bf16;
  // The trainer's index among its node's trainers: it runs on device
  // local_index mod the visible devices.
  int local_index = 0;
  model::TpShard shard;       // this trainer's TP shard (model/params.hpp)
  model::StageLayers stage;   // its pipeline stage's layers (the whole model at pp = 1)
  int64_t loss_chunk = 1024;  // model.loss_chunk
};

// Fails (Error) with the reason when no GPU is visible or the build has no CUDA.
std::unique_ptr<TrainerBackend> make_cuda_backend(const model::Shape& shape,
                                                  const CudaBackendSpec& spec);

// One line: NCCL and CUDA runtime versions and the visible devices, or why
// the CUDA backend cannot be loaded ("CPU-only build" without CUDA). Loads
// the module.
std::string cuda_backend_summary();

}  // namespace meshloom::train
