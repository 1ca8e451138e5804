// Host memory of one trainer on the CPU backend, term by term: the formulas
// of the buffers model::Transformer (model/transformer.cpp, ensure_buffers)
// and the trainer allocate, for its TP shard (parallel.tp) and its largest
// micro-batch. `meshloom plan` prints it; the start-up check
// (runtime/preflight.cpp) refuses a node whose trainers cannot hold the floor.
// Pure code: no MPI. tests/plan/host_memory_test.cpp holds the formulas
// against the sizes a real model allocates.
//
// A TP rank holds 1/tp of every weight matrix (ceil(V / tp) vocabulary rows;
// the norm gains whole), the activations of its H/tp heads and F/tp FFN
// columns, and the replicated residual stream and norms whole (ceil(n / tp)
// rows of them with sequence parallelism, plus an [n, d] gather buffer and
// the norm gains' partial gradients). A pipeline stage (parallel.pp) holds
// its layers' weights (the embedding on the first stage and, tied, the
// last; the final norm, head and loss buffers on the last) and keeps the
// activations of the micro-batches 1F1B leaves between forward and backward:
// pp - s of them on stage s < pp - 1, besides the set it computes in.
// Left out: the
// ring attention's K/V blocks (a split sequence's), OpenBLAS's and MPI's own
// buffers, and the checkpoint's host copies.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "model/shape.hpp"
#include "plan/cost/device_memory.hpp"

namespace meshloom::plan {

struct HostMemoryInput {
  model::Shape shape;
  int64_t tokens = 0;        // n: the largest micro-batch
  int tp = 1;                // TP group size (this rank's shard)
  int hdp = 1;               // HDP ranks (ZeRO-1 shards the moments over them)
  bool zero1 = false;        // optim.zero1
  int64_t loss_chunk = 512;  // model.loss_chunk
  // parallel.sequence_parallel (tp > 1): the residual stream, the norms'
  // inputs and outputs and their gradients are kept for ceil(n / tp) rows.
  bool sequence_parallel = false;
  // Pipeline parallelism: this stage's layers (0: all, no pipeline), whether
  // it is the first and the last, and the activation sets it keeps parked.
  int64_t stage_layers = 0;
  bool first_stage = true, last_stage = true;
  int64_t parked = 0;
};

struct HostMemory {
  HostMemoryInput input;
  int64_t weights = 0;      // fp32, this rank's shard
  int64_t grads = 0;        // fp32, the same size
  int64_t moments = 0;      // AdamW m and v (this HDP rank's slice with ZeRO-1)
  int64_t activations = 0;  // what forward keeps for backward, all layers
  int64_t workspace = 0;    // backward scratch, RoPE angles, the batch's ids
  int64_t logits = 0;       // the loss's chunk of logits beyond the scratch it borrows

  using Term = DeviceMemory::Term;
  std::vector<Term> terms() const;
  int64_t total() const;
  // "5.2 GiB (activations 3.6 GiB, ...)": the total and its biggest terms.
  std::string describe(int most = 3) const;
};

HostMemory host_memory(const HostMemoryInput& in);

// Config `c` on `trainers` trainers (trainers / (tp x pp) HDP ranks), for
// its largest micro-batch; with parallel.pp > 1 the stage that needs most.
HostMemory host_memory_for_run(const config::Config& c, int trainers);

// The floor a trainer cannot go below whatever its micro-batches: weights,
// gradients, moments and one chunk of logits (min(plan.capacity,
// model.loss_chunk) tokens × V / tp: at small micro-batches the chunk is
// larger than the scratch it borrows). A run above it cannot fit.
int64_t host_memory_floor(const config::Config& c, int trainers);

// The tokens whose logits the CPU backend's fused LM loss holds at once: one
// chunk of the largest micro-batch.
int64_t host_logit_tokens(const config::Config& c);

}  // namespace meshloom::plan
