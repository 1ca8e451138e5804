// Device memory of one trainer on the CUDA backend: what the model, its
// optimizer and its largest micro-batch allocate on the GPU, term by term, so
// that a run that cannot fit fails at start with the numbers (Trainer, through
// the CUDA model's start_optimizer) rather than with an out-of-memory error
// deep in a step, and `meshloom plan` can print it. Pure code: no CUDA, no MPI.
//
// Each term is the formula of the buffers the code allocates (device_memory.cpp
// names the file of each). Device buffers grow to the largest size they are
// asked for and never shrink (kernels/host/device_buffer.hpp), so the peak
// is the model's state plus what the largest micro-batch needs.
//
// The one rule that is not obvious: an offloaded micro-batch keeps fewer
// layers' activations on the device, so the planner packs more tokens into it
// (up to C·layers/2 at r = 1, plan/plan.hpp's capacity). Its activations stay
// about C·layers layer-tokens, but the workspace, the logits and the ring
// blocks grow with its tokens: offloading lets a long sequence use fewer
// trainers, it does not lower a trainer's peak.
//
// The total is a floor, not a bound: left out are cuBLAS's own memory and
// that of the trainers' NCCL communicators (the CP groups' are counted at
// their cache's bound, run.gpu_group_cache_mib), stream-ordered scratch of a
// few rows (norm gains' partial sums, attention tile ranges), the start-up
// measurement of the GPU's peak (three 8192² matrices, freed before the
// first step), and the buffers a trainer that meets micro-batches of several
// offload ratios keeps from each (a layer's buffers keep the size of the
// largest micro-batch that held it resident). A run above the floor cannot
// fit; one below it still needs some margin.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "model/shape.hpp"

namespace meshloom::plan {

struct DeviceMemoryInput {
  model::Shape shape;  // dense (experts = 1); `tied` as model.tied_embeddings
  int elem_bytes = 2;  // working weights and activations: 2 (bf16) or 4 (fp32)
  int64_t tokens = 0;  // n: the micro-batch's tokens (this trainer's part of a ring)
  double offload = 0;  // its offload ratio r in [0, 1]
  int trainers = 1;    // T: the HDP ranks (trainers / tp), which ZeRO-1 shards over
  bool zero1 = false;  // AdamW state sharded over the trainers
  bool rings = false;  // the micro-batch may run as a ring (k > 1)
  bool nccl = false;   // rings go over NCCL (blocks stay on the device), else MPI
  // With NCCL rings: the bound of the CP groups' communicator cache
  // (run.gpu_group_cache_mib), all of which it may hold.
  int64_t group_cache = 0;
  // A split micro-batch may run Ulysses or hybrid attention.
  bool ulysses = false;
  // Tensor parallelism: the estimate is for TP rank 0 of a group of tp: its
  // shard of the weights (model::Shape::numel(tp)) and the activations of its
  // H/tp heads and F/tp FFN columns; the residual stream and norms whole.
  int tp = 1;
  int64_t loss_chunk = 512;  // model.loss_chunk: tokens whose logits exist at once
  // Positions the RoPE table covers (data.seq_len: positions restart in
  // every sample); 0 leaves the table out.
  int64_t positions = 0;
  // Micro-batches whose activations are kept at once: 1, or under a 1F1B
  // pipeline min(pp - s, M) on stage s (stage 0 holds pp of them).
  int in_flight = 1;
  // Pipeline parallelism: the estimate is for one stage of `stage_layers`
  // layers (-1: the whole model), with the embedding on the first (and on
  // the last when tied), the final norm, the head and the loss's logits on
  // the last (model::Shape::stage_numel), and the stage transfers' buffers.
  int64_t stage_layers = -1;
  bool first_stage = true, last_stage = true;
  // bf16 attention may run on cuDNN (MESHLOOM_ATTENTION=auto picks it on an
  // sm_90 GPU): count its scratch (the `cudnn` term). Off by default for now:
  // the planner's 70B-scale fits (simulate_pipeline_test) sit so close to
  // the GPU's size that counting it changes their pipeline degree, which
  // needs a decision of its own.
  bool cudnn_attention = false;
};

struct DeviceMemory {
  DeviceMemoryInput input;
  // The model's state, allocated at start.
  int64_t weights = 0;  // working copy, elem_bytes per parameter
  int64_t master = 0;   // fp32 master weights (ZeRO-1: padded to T equal shards)
  int64_t moments = 0;  // AdamW m and v (fp32) and the weight-decay mask of the owned slice
  int64_t grads = 0;    // fp32 gradients, the whole model
  int64_t cublas = 0;   // the cuBLAS workspace
  // The largest micro-batch, allocated by its first forward and kept.
  int64_t activations = 0;   // the layers kept on the device for backward
  int64_t workspace = 0;     // backward scratch (reused by every layer), final norm, ids
  int64_t logits = 0;        // the fused loss: a chunk's logits, its unscaled gradients, row losses
  int64_t ring_buffers = 0;  // the ring transport's K/V + fp32 dK/dV blocks
  int64_t ring_attention = 0;  // the ring's fp32 output accumulators
  int64_t ulysses = 0;         // Ulysses' head-sharded copies of its group's tokens
  int64_t group_comms = 0;     // the CP groups' NCCL communicators, at their bound
  int64_t cudnn = 0;           // cuDNN attention's scratch and plan workspace (bf16)
  int resident_layers = 0;     // layers whose activations stay on the device

  struct Term {
    const char* name;
    int64_t bytes;
  };
  // Every term above, in that order.
  std::vector<Term> terms() const;
  int64_t total() const;
  // "31.2 GiB (activations 20.0 GiB, logits 6.1 GiB, workspace 3.0 GiB)": the
  // total and its `most` biggest terms.
  std::string describe(int most = 3) const;
};

DeviceMemory device_memory(const DeviceMemoryInput& in);

// "31.2 GiB (activations 20.0 GiB, ...)": the sum of `terms` and the `most`
// biggest of them.
std::string describe_terms(std::vector<DeviceMemory::Term> terms, int most);

// Layers whose activations stay on the device for a micro-batch with offload
// ratio r, as the CUDA model rounds it (kernels/host/model/cuda_backend.cpp): the
// first 2 + round(r·(layers − 2)) layers share two slots, the rest stay.
int resident_layers(int layers, double offload);

// The most tokens a micro-batch may hold on a GPU of `bytes` (the estimate's
// total for `in` with in.tokens = n at most `bytes`), 0 if not even the
// model's state fits. What `meshloom simulate --capacity auto` gives each
// HDP rank.
int64_t capacity_for_memory(DeviceMemoryInput in, double bytes);

// The run's estimate: config `c` on `trainers` trainers, rings over NCCL or
// not, for its largest micro-batch (C tokens; with plan.offload, an
// offloaded one of up to min(C·layers/2, data.seq_len) tokens, whichever
// needs more). With parallel.pp > 1, for pipeline stage `stage` (its layers,
// pp - stage micro-batches in flight under 1F1B; -1: the stage that needs
// the most).
DeviceMemory device_memory_for_run(const config::Config& c, int trainers, bool nccl,
                                   int stage = -1);

// The most tokens one of a trainer's micro-batches holds: plan.capacity,
// never more than the step (data.tokens_per_step).
int64_t largest_micro_batch(const config::Config& c);

// The message of a run that does not fit: the estimate's biggest terms, the
// free bytes, and the config keys that lower it. `sharers`: trainers that
// share the GPU, each needing the estimate.
std::string device_memory_error(const config::Config& c, const DeviceMemory& m, double free_bytes,
                                int sharers);

}  // namespace meshloom::plan
