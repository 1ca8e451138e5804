// Gradient all-reduce in buckets, overlapped with backward.
//
// One flat fp32 gradient buffer is cut into buckets (~25 MB) from its end
// (kernels/host/comm/grad_buckets.hpp: backward finishes the last layers first).
// As backward enqueues the kernels that leave a range of gradients final, it
// calls mark_ready(offset, count); once a bucket is complete (and every
// bucket before it launched: the same order on every trainer) the reducer
// records an event on the compute stream, makes its own communication stream
// wait for it, and launches ncclAllReduce(sum) of the bucket in place there.
// finish() makes the compute stream wait for every reduction.
//
// The result is the plain sum over trainers. Averaging, or scaling by the
// step's global prediction count, is the caller's business (the CPU trainer
// scales the loss by 1/global_predictions before backward: do the same).
//
//   GradReducer reducer(trainers.get(), grads, n, compute);
//   ... backward, last micro-batch: after each tensor's gradient kernels,
//       reducer.mark_ready(tensor.offset, tensor.numel);
//   reducer.finish();   // compute stream now sees the summed gradients
//
// Gradients accumulated over several micro-batches are final only in the
// last one: mark there (or call mark_all_ready() after backward, with no
// overlap). Every element must be marked once per step, on every trainer.
//
// NCCL runs a communicator's operations in the order they were issued: on a
// communicator shared with ring exchanges, every trainer must issue its
// reductions and exchanges in the same relative order (true when all run the
// same backward over the same plan). To decouple them, pass the reducer a
// communicator of its own, e.g. GroupComms' communicator of all trainers.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/host/comm/grad_buckets.hpp"

namespace meshloom::cuda {

class GradReducer {
 public:
  static constexpr size_t kDefaultBucketBytes = size_t(25) << 20;

  // `grads` (numel floats on the current device) and `compute` must outlive
  // the reducer; `comm` is the trainers' communicator. Creates its own
  // high-priority communication stream on the current device.
  GradReducer(ncclComm_t comm, float* grads, int64_t numel, cudaStream_t compute,
              size_t bucket_bytes = kDefaultBucketBytes);
  ~GradReducer();
  GradReducer(const GradReducer&) = delete;
  GradReducer& operator=(const GradReducer&) = delete;

  // Call after enqueuing, on the compute stream, the work that leaves
  // [offset, offset + count) final for this step.
  void mark_ready(int64_t offset, int64_t count);
  void mark_bucket_ready(size_t bucket);
  // The whole buffer at once (no overlap), instead of the calls above.
  void mark_all_ready();
  // Every element not marked yet: after backward, whatever was announced
  // early (a trainer with no micro-batch announces nothing).
  void mark_rest_ready();
  // Makes the compute stream wait for every reduction; every bucket must
  // have been marked. Then ready for the next step.
  void finish();

  const std::vector<Bucket>& buckets() const { return tracker_.buckets(); }

 private:
  void launch(const std::vector<size_t>& ready);

  ncclComm_t comm_;
  float* grads_;
  cudaStream_t compute_;
  BucketTracker tracker_;
  cudaStream_t comm_stream_ = nullptr;
  cudaEvent_t ready_ = nullptr;  // re-recorded per launch: a wait takes its latest record
  cudaEvent_t done_ = nullptr;
};

}  // namespace meshloom::cuda
