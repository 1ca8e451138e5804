#include "kernels/host/comm/grad_reducer.hpp"

#include <string>

#include "base/check.hpp"
#include "kernels/device/common/check.cuh"

namespace meshloom::cuda {

GradReducer::GradReducer(ncclComm_t comm, float* grads, int64_t numel, cudaStream_t compute,
                         size_t bucket_bytes)
    : comm_(comm),
      grads_(grads),
      compute_(compute),
      tracker_(numel, bucket_elems_for_bytes(bucket_bytes)) {
  ML_CHECK(comm_ != nullptr, "the gradient reducer needs a communicator");
  ML_CHECK(grads_ != nullptr || numel == 0, "the gradient reducer needs a buffer");
  // Highest priority: a reduction should not queue behind backward's kernels.
  int least = 0, greatest = 0;
  CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  CUDA_CHECK(cudaStreamCreateWithPriority(&comm_stream_, cudaStreamNonBlocking, greatest));
  CUDA_CHECK(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
}

GradReducer::~GradReducer() {
  // Never fail in a destructor; let launched reductions end first.
  if (comm_stream_) cudaStreamSynchronize(comm_stream_);
  if (ready_) cudaEventDestroy(ready_);
  if (done_) cudaEventDestroy(done_);
  if (comm_stream_) cudaStreamDestroy(comm_stream_);
}

void GradReducer::mark_ready(int64_t offset, int64_t count) {
  launch(tracker_.mark(offset, count));
}

void GradReducer::mark_bucket_ready(size_t bucket) { launch(tracker_.mark_bucket(bucket)); }

void GradReducer::mark_all_ready() {
  const auto& all = tracker_.buckets();
  if (all.empty()) return;
  // Buckets are contiguous: the head's offset is 0, the tail ends the buffer.
  const int64_t numel = all.front().offset + all.front().count;
  launch(tracker_.mark(0, numel));
}

void GradReducer::mark_rest_ready() { launch(tracker_.mark_rest()); }

void GradReducer::launch(const std::vector<size_t>& ready) {
  if (ready.empty()) return;
  // One event covers them all: everything enqueued on compute so far.
  CUDA_CHECK(cudaEventRecord(ready_, compute_));
  CUDA_CHECK(cudaStreamWaitEvent(comm_stream_, ready_, 0));
  for (size_t b : ready) {
    const Bucket& k = tracker_.buckets()[b];
    float* p = grads_ + k.offset;
    NCCL_CHECK(ncclAllReduce(p, p, size_t(k.count), ncclFloat32, ncclSum, comm_, comm_stream_));
  }
}

void GradReducer::finish() {
  ML_CHECK(tracker_.all_launched(),
           "gradient buckets not all marked ready: " + std::to_string(tracker_.launched()) +
               " of " + std::to_string(tracker_.buckets().size()) + " launched");
  CUDA_CHECK(cudaEventRecord(done_, comm_stream_));
  CUDA_CHECK(cudaStreamWaitEvent(compute_, done_, 0));
  tracker_.reset();
}

}  // namespace meshloom::cuda
