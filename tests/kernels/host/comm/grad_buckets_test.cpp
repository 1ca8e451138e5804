// Gradient bucket cutting and the in-order launch rule (no GPU).
#include "kernels/host/comm/grad_buckets.hpp"

#include <gtest/gtest.h>

#include "base/check.hpp"

namespace meshloom::cuda {
namespace {

using Launch = std::vector<size_t>;

TEST(GradBuckets, CutFromTheEndWithAShortHead) {
  const auto b = cut_buckets(10, 4);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].offset, 6);
  EXPECT_EQ(b[0].count, 4);
  EXPECT_EQ(b[1].offset, 2);
  EXPECT_EQ(b[1].count, 4);
  EXPECT_EQ(b[2].offset, 0);
  EXPECT_EQ(b[2].count, 2);
  EXPECT_TRUE(cut_buckets(0, 4).empty());
  ASSERT_EQ(cut_buckets(3, 8).size(), 1u);
  EXPECT_EQ(cut_buckets(3, 8)[0].count, 3);
  EXPECT_EQ(cut_buckets(8, 4).size(), 2u);
}

TEST(GradBuckets, CoverTheBufferOnceForOddSizes) {
  for (int64_t numel : {1, 2, 7, 97, 1000, 1001, 65537})
    for (int64_t elems : {1, 3, 64, 1000, 100000}) {
      const auto b = cut_buckets(numel, elems);
      int64_t end = numel;
      for (const auto& k : b) {
        EXPECT_EQ(k.offset + k.count, end);
        EXPECT_GT(k.count, 0);
        EXPECT_LE(k.count, elems);
        end = k.offset;
      }
      EXPECT_EQ(end, 0);
    }
}

TEST(GradBuckets, BytesToElements) {
  EXPECT_EQ(bucket_elems_for_bytes(size_t(25) << 20), (int64_t(25) << 20) / 4);
  EXPECT_EQ(bucket_elems_for_bytes(0), 1);
  EXPECT_EQ(bucket_elems_for_bytes(7), 1);
}

TEST(BucketTracker, LaunchesWhenCompleteAndInOrder) {
  set_fatal_handler(throwing_fatal_handler);
  BucketTracker t(10, 4);  // buckets [6,10) [2,6) [0,2)
  EXPECT_EQ(t.mark(8, 2), (Launch{}));
  EXPECT_EQ(t.mark(3, 3), (Launch{}));      // bucket 1 not complete, bucket 0 neither
  EXPECT_EQ(t.mark(6, 2), (Launch{0}));     // bucket 0 complete
  EXPECT_EQ(t.mark(0, 3), (Launch{1, 2}));  // element 2 completes bucket 1; bucket 2 too
  EXPECT_TRUE(t.all_launched());
  t.reset();
  EXPECT_EQ(t.launched(), 0u);
  // Out of order: bucket 2 complete first waits for 0 and 1.
  EXPECT_EQ(t.mark_bucket(2), (Launch{}));
  EXPECT_EQ(t.mark(2, 3), (Launch{}));
  EXPECT_EQ(t.mark(5, 5), (Launch{0, 1, 2}));  // overlaps buckets 1 and 0 both
}

TEST(BucketTracker, RangesSpanningManyBuckets) {
  BucketTracker t(1001, 7);
  const size_t n = t.buckets().size();
  EXPECT_EQ(n, 143u);  // 1001 = 143 x 7
  // Mark tensors of odd sizes from the end, as backward does.
  std::vector<size_t> all;
  for (int64_t end = 1001; end > 0;) {
    const int64_t count = std::min<int64_t>(end, 13);
    for (size_t b : t.mark(end - count, count)) all.push_back(b);
    end -= count;
  }
  ASSERT_EQ(all.size(), n);
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(all[i], i);
}

TEST(BucketTracker, MarkRestLaunchesWhatIsLeftInOrder) {
  BucketTracker t(10, 4);                // buckets [6,10) [2,6) [0,2)
  EXPECT_EQ(t.mark(6, 4), (Launch{0}));  // the last layers, announced early
  EXPECT_EQ(t.mark(0, 2), (Launch{}));   // bucket 2 waits for bucket 1
  EXPECT_EQ(t.mark_rest(), (Launch{1, 2}));
  EXPECT_TRUE(t.all_launched());
  t.reset();
  EXPECT_EQ(t.mark_rest(), (Launch{0, 1, 2}));  // nothing announced (no micro-batch)
  EXPECT_EQ(t.mark_rest(), (Launch{}));         // idempotent once all launched
}

TEST(BucketTracker, RejectsDoubleMarksAndStrayRanges) {
  set_fatal_handler(throwing_fatal_handler);
  BucketTracker t(10, 4);
  t.mark(0, 2);
  EXPECT_THROW(t.mark(0, 2), Error);
  BucketTracker u(10, 4);
  EXPECT_THROW(u.mark(8, 3), Error);
  EXPECT_THROW(u.mark(-1, 1), Error);
  EXPECT_EQ(u.mark(4, 0), (Launch{}));
  BucketTracker empty(0, 4);
  EXPECT_TRUE(empty.all_launched());
}

}  // namespace
}  // namespace meshloom::cuda
