#include "kernels/host/comm/grad_buckets.hpp"

#include <algorithm>
#include <string>

#include "base/check.hpp"

namespace meshloom::cuda {

std::vector<Bucket> cut_buckets(int64_t numel, int64_t bucket_elems) {
  ML_CHECK(numel >= 0, "a negative gradient size");
  ML_CHECK(bucket_elems >= 1, "a bucket must hold at least one element");
  std::vector<Bucket> out;
  for (int64_t end = numel; end > 0; end -= bucket_elems) {
    const int64_t begin = std::max<int64_t>(0, end - bucket_elems);
    out.push_back(Bucket{begin, end - begin});
  }
  return out;
}

int64_t bucket_elems_for_bytes(size_t bytes) {
  return std::max<int64_t>(1, int64_t(bytes / sizeof(float)));
}

BucketTracker::BucketTracker(int64_t numel, int64_t bucket_elems)
    : numel_(numel),
      bucket_elems_(bucket_elems),
      buckets_(cut_buckets(numel, bucket_elems)),
      ready_(buckets_.size(), 0) {}

size_t BucketTracker::bucket_of(int64_t element) const {
  return size_t((numel_ - 1 - element) / bucket_elems_);
}

std::vector<size_t> BucketTracker::mark(int64_t offset, int64_t count) {
  ML_CHECK(offset >= 0 && count >= 0 && offset + count <= numel_,
           "gradient range [" + std::to_string(offset) + ", +" + std::to_string(count) +
               ") outside the buffer of " + std::to_string(numel_));
  if (count == 0) return {};
  const int64_t end = offset + count;
  // The range's last element lies in the lowest-numbered bucket it touches.
  for (size_t b = bucket_of(end - 1); b <= bucket_of(offset); ++b) {
    const Bucket& k = buckets_[b];
    const int64_t overlap = std::min(end, k.offset + k.count) - std::max(offset, k.offset);
    ready_[b] += overlap;
    ML_CHECK(ready_[b] <= k.count,
             "gradient bucket " + std::to_string(b) + " marked ready twice in one step");
  }
  return advance();
}

std::vector<size_t> BucketTracker::mark_bucket(size_t bucket) {
  ML_CHECK(bucket < buckets_.size(), "no gradient bucket " + std::to_string(bucket));
  return mark(buckets_[bucket].offset, buckets_[bucket].count);
}

std::vector<size_t> BucketTracker::mark_rest() {
  for (size_t b = 0; b < buckets_.size(); ++b) ready_[b] = buckets_[b].count;
  return advance();
}

std::vector<size_t> BucketTracker::advance() {
  std::vector<size_t> now;
  while (launched_ < buckets_.size() && ready_[launched_] == buckets_[launched_].count)
    now.push_back(launched_++);
  return now;
}

void BucketTracker::reset() {
  std::fill(ready_.begin(), ready_.end(), 0);
  launched_ = 0;
}

}  // namespace meshloom::cuda
