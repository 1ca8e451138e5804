// Gradient buckets: how GradReducer (kernels/host/comm/grad_reducer.hpp) cuts the
// flat gradient buffer and decides when a bucket may be all-reduced. Pure C++
// (no CUDA), unit-tested without a device.
//
// Backward produces the last layer's gradients first, and the flat buffer
// lists tensors in forward order, so buckets are cut from the end: bucket 0
// is the tail [numel - size, numel), the last bucket the (possibly shorter)
// head. Buckets launch strictly in index order, whatever order their ranges
// were marked in: NCCL needs every trainer to issue its all-reduces in the
// same order, and the marking order is the only thing that could differ.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace meshloom::cuda {

struct Bucket {
  int64_t offset = 0;  // first element
  int64_t count = 0;   // elements
};

// Buckets of `bucket_elems` (>= 1) cut from the end of [0, numel).
std::vector<Bucket> cut_buckets(int64_t numel, int64_t bucket_elems);

// fp32 elements in `bytes` (at least 1).
int64_t bucket_elems_for_bytes(size_t bytes);

// Which buckets are complete, and which may launch now.
class BucketTracker {
 public:
  BucketTracker(int64_t numel, int64_t bucket_elems);

  // Records that [offset, offset + count) holds its final gradients for this
  // step (every element once per step). Returns the buckets that may launch
  // now, in order: complete, and every lower-numbered bucket launched.
  std::vector<size_t> mark(int64_t offset, int64_t count);
  // The same for a whole bucket.
  std::vector<size_t> mark_bucket(size_t bucket);
  // Marks every element not marked yet this step (backward is over: what was
  // not announced early is final now). Returns the buckets that launch now.
  std::vector<size_t> mark_rest();

  const std::vector<Bucket>& buckets() const { return buckets_; }
  size_t launched() const { return launched_; }
  bool all_launched() const { return launched_ == buckets_.size(); }
  // Forgets the step: nothing marked, nothing launched.
  void reset();

 private:
  size_t bucket_of(int64_t element) const;
  std::vector<size_t> advance();

  int64_t numel_;
  int64_t bucket_elems_;
  std::vector<Bucket> buckets_;
  std::vector<int64_t> ready_;  // elements marked, per bucket
  size_t launched_ = 0;         // buckets [0, launched_) are launched
};

}  // namespace meshloom::cuda
