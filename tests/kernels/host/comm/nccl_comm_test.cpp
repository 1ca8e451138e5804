// NCCL communication over MPI ranks, one GPU per rank: the bootstrap, group
// communicators split and cached by member set, the ring exchange and its
// all-gather, and the bucketed gradient all-reduce. Values are small
// multiples of 1/4, so sums are exact in fp32 in any order and results
// compare exactly.
//
// NCCL refuses two ranks on one GPU: with fewer visible GPUs than ranks on a
// node every test skips, and every rank decides the same (nccl_usable is a
// collective), so none waits alone in a collective.
#include "kernels/host/comm/nccl_comm.hpp"

#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <thread>
#include <vector>

#include "base/check.hpp"
#include "kernels/device/common/check.cuh"
#include "kernels/host/comm/grad_reducer.hpp"
#include "kernels/host/comm/group_comms.hpp"
#include "kernels/host/comm/ring_exchange.hpp"
#include "kernels/host/device_buffer.hpp"
#include "tests/kernels/nccl_test.hpp"

namespace meshloom::cuda {
namespace {

constexpr double kTimeout = 120;  // seconds before a wait fails instead of hanging

// What trainer `rank` contributes at element i.
float value(int rank, int64_t i) { return float((rank + 1) * (int(i % 61) - 30)) * 0.25f; }

float sum_over(const std::vector<int>& ranks, int64_t i) {
  float s = 0;
  for (int r : ranks) s += value(r, i);
  return s;
}

std::vector<int> all_ranks() {
  std::vector<int> r(static_cast<size_t>(world_size()));
  std::iota(r.begin(), r.end(), 0);
  return r;
}

// Blocking streams: ordered after the legacy-stream copies of DeviceBuffer.
struct Stream {
  Stream() { CUDA_CHECK(cudaStreamCreate(&s)); }
  ~Stream() { cudaStreamDestroy(s); }
  cudaStream_t s = nullptr;
};

// Pinned host memory: copies from it are truly asynchronous.
struct Pinned {
  explicit Pinned(size_t n) { CUDA_CHECK(cudaMallocHost(&p, n * sizeof(float))); }
  ~Pinned() { cudaFreeHost(p); }
  Pinned(const Pinned&) = delete;
  Pinned& operator=(const Pinned&) = delete;
  float* p = nullptr;
};

// All-reduces value(me, i) over `comm` and counts elements that differ from
// the sum over `members`.
int64_t all_reduce_mismatches(ncclComm_t comm, const std::vector<int>& members, int64_t n) {
  std::vector<float> host(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) host[size_t(i)] = value(world_rank(), i);
  DeviceBuffer<float> buf(host);
  Stream s;
  NCCL_CHECK(ncclAllReduce(buf.data(), buf.data(), size_t(n), ncclFloat32, ncclSum, comm, s.s));
  wait_stream(s.s, comm, kTimeout, "a test all-reduce");
  const std::vector<float> got = buf.download();
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) bad += got[size_t(i)] != sum_over(members, i);
  return bad;
}

TEST(NcclComm, BootstrapsThroughMpiAndSums) {
  ML_REQUIRE_GPU_PER_RANK();
  NcclComm trainers(MPI_COMM_WORLD);
  EXPECT_EQ(trainers.rank(), world_rank());
  EXPECT_EQ(trainers.size(), world_size());
  int nccl_rank = -1, nccl_size = 0, devices = 0, current = -1;
  NCCL_CHECK(ncclCommUserRank(trainers.get(), &nccl_rank));
  NCCL_CHECK(ncclCommCount(trainers.get(), &nccl_size));
  EXPECT_EQ(nccl_rank, world_rank());
  EXPECT_EQ(nccl_size, world_size());
  CUDA_CHECK(cudaGetDeviceCount(&devices));
  CUDA_CHECK(cudaGetDevice(&current));
  EXPECT_EQ(trainers.device(), node_ranks(MPI_COMM_WORLD).local_rank % devices);
  EXPECT_EQ(current, trainers.device());
  EXPECT_EQ(all_reduce_mismatches(trainers.get(), all_ranks(), 1001), 0);
  // Moving keeps one owner; the moved-to communicator still works.
  NcclComm moved = std::move(trainers);
  EXPECT_EQ(trainers.get(), nullptr);
  EXPECT_EQ(all_reduce_mismatches(moved.get(), all_ranks(), 7), 0);
}

TEST(GroupComms, SplitsEachMemberSetOnceAndSumsOverItsMembers) {
  ML_REQUIRE_GPU_PER_RANK();
  NcclComm trainers(MPI_COMM_WORLD);
  const int me = world_rank(), p = world_size();
  const std::vector<int> all = all_ranks();
  std::vector<int> reversed(all.rbegin(), all.rend());
  // A step's groups: the same set in two ring orders, singletons, pairs.
  std::vector<std::vector<int>> step = {reversed, {0}, {p - 1}, all};
  for (int i = 0; i + 1 < p; i += 2) step.push_back({i + 1, i});
  const std::vector<comm::MemberSet> sets = comm::distinct_member_sets(step);
  {
    GroupComms groups(trainers.get());
    EXPECT_EQ(groups.trainer(), me);
    groups.prepare(step);
    EXPECT_EQ(groups.size(), sets.size());
    EXPECT_EQ(groups.splits(), comm::split_rounds(sets).size());
    EXPECT_EQ(groups.get(reversed), groups.get(all));
    const ncclComm_t whole = groups.get(all);
    const size_t splits = groups.splits();
    groups.prepare(step);  // the same groups next step: cached, no split
    groups.prepare({{p - 1}, all});
    EXPECT_EQ(groups.splits(), splits);
    EXPECT_EQ(groups.get(all), whole);
    // Every set in the same order on every rank; members only take part.
    for (const comm::MemberSet& set : sets) {
      const bool member = std::binary_search(set.begin(), set.end(), me);
      EXPECT_TRUE(groups.contains(set));
      if (!member) {
        EXPECT_THROW(groups.get(set), Error);
        continue;
      }
      const ncclComm_t g = groups.get(set);
      int rank = -1, count = 0;
      NCCL_CHECK(ncclCommUserRank(g, &rank));
      NCCL_CHECK(ncclCommCount(g, &count));
      EXPECT_EQ(count, int(set.size()));
      EXPECT_EQ(set[size_t(rank)], me);  // ranks follow the sorted member set
      EXPECT_EQ(all_reduce_mismatches(g, set, 333), 0) << "group of " << set.size();
    }
  }
  if (p < 2) return;  // eviction needs distinct sets
  // Capacity 2: the least recent set goes (its communicator destroyed) and a
  // later step that needs it again splits it again.
  GroupComms small(trainers.get(), GroupCommsOptions{.capacity = 2});
  small.prepare({{0}});
  small.prepare({{1}});
  small.prepare({all});  // evicts {0}
  EXPECT_FALSE(small.contains(std::vector<int>{0}));
  EXPECT_EQ(small.size(), 2u);
  const size_t before = small.splits();
  small.prepare({{0}});  // evicts {1}
  EXPECT_EQ(small.splits(), before + 1);
  EXPECT_FALSE(small.contains(std::vector<int>{1}));
  if (me == 0) {
    EXPECT_EQ(all_reduce_mismatches(small.get(std::vector<int>{0}), {0}, 65), 0);
  }
  EXPECT_EQ(all_reduce_mismatches(small.get(all), all, 129), 0);
}

// The memory bound: each new communicator's device memory is measured at its
// split and agreed over the trainers; the cache never holds more than its
// budget beyond what the current step needs.
TEST(GroupComms, MeasuresItsCommunicatorsAndKeepsThemWithinTheBudget) {
  ML_REQUIRE_GPU_PER_RANK();
  NcclComm trainers(MPI_COMM_WORLD);
  const int p = world_size();
  const std::vector<int> all = all_ranks();
  int64_t whole = 0;
  {
    GroupComms probe(trainers.get());
    const comm::GroupCommStats st = probe.prepare({all});
    whole = probe.bytes_of(all);
    EXPECT_EQ(st.held_bytes, whole);
    EXPECT_EQ(st.misses, 1);
    int64_t lo = whole, hi = whole;  // the same number on every trainer
    MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
    EXPECT_EQ(lo, hi);
    // Buffers for each peer: a communicator of two or more is not free.
    if (p >= 2) {
      EXPECT_GT(whole, 0);
    }
    if (world_rank() == 0)
      std::printf("communicator of %d trainers: %.1f MiB measured\n", p, double(whole) / 1048576);
  }
  if (p < 2) return;  // one trainer has one set only
  // A budget of the whole set's cost: singletons beside it go, and it goes
  // beside them, whenever they cost anything.
  GroupComms small(trainers.get(), GroupCommsOptions{.byte_budget = std::max<int64_t>(1, whole)});
  const std::vector<std::vector<std::vector<int>>> steps = {{all},     {{0}, {p - 1}}, {all},
                                                            {{p - 1}}, {all, {0}},     {all}};
  for (size_t s = 0; s < steps.size(); ++s) {
    const comm::GroupCommStats st = small.prepare(steps[s]);
    int64_t step_bytes = 0;
    for (const auto& g : steps[s]) step_bytes += small.bytes_of(g);
    EXPECT_EQ(st.held_bytes, small.bytes()) << "step " << s;
    EXPECT_LE(small.bytes(), std::max<int64_t>(whole, step_bytes)) << "step " << s;
    for (const auto& g : steps[s]) {
      if (std::find(g.begin(), g.end(), world_rank()) == g.end()) continue;
      EXPECT_EQ(all_reduce_mismatches(small.get(g), g, 97), 0) << "step " << s;
    }
  }
}

// Byte b of trainer t's block in step s.
uint8_t block_byte(int t, size_t b, int s) {
  return uint8_t((t * 31 + int(b % 251) * 7 + s) & 255);
}

TEST(RingExchange, PassesEachBufferToTheNextMember) {
  ML_REQUIRE_GPU_PER_RANK();
  NcclComm trainers(MPI_COMM_WORLD);
  const int rank = world_rank(), p = world_size();
  Stream s;
  for (int step = 0; step < 4; ++step) {
    // Steps 0-2: one ring over all ranks in reverse order (so the neighbours
    // are not rank +-1) with odd sizes that differ per member and per step.
    // Step 3: every rank alone in a ring of one.
    std::vector<int> ring;
    for (int r = p - 1; r >= 0; --r) ring.push_back(r);
    int me = p - 1 - rank;
    if (step == 3) {
      ring = {rank};
      me = 0;
    }
    const comm::RingPeers peers = comm::ring_peers(ring, me);
    auto bytes_of = [&](int t) { return size_t(1000 + 37 * t + 101 * step + 1); };
    std::vector<uint8_t> out(bytes_of(rank));
    for (size_t b = 0; b < out.size(); ++b) out[b] = block_byte(rank, b, step);
    DeviceBuffer<uint8_t> send(out), recv(bytes_of(peers.prev));
    recv.zero();
    CUDA_CHECK(cudaDeviceSynchronize());  // recv.zero() ran on the legacy stream
    ring_exchange(trainers.get(), ring, me, send.data(), send.size(), recv.data(), recv.size(),
                  s.s);
    wait_stream(s.s, trainers.get(), kTimeout, "the test ring exchange");
    const std::vector<uint8_t> got = recv.download();
    int64_t bad = 0;
    for (size_t b = 0; b < got.size(); ++b) bad += got[b] != block_byte(peers.prev, b, step);
    EXPECT_EQ(bad, 0) << "step " << step << ": block from trainer " << peers.prev;
  }
  // Nothing to send: nothing moves, nothing hangs.
  ring_exchange(trainers.get(), all_ranks(), rank, nullptr, 0, nullptr, 0, s.s);
  wait_stream(s.s, trainers.get(), kTimeout, "an empty ring exchange");
}

TEST(RingExchange, AllGathersEveryMembersEntry) {
  ML_REQUIRE_GPU_PER_RANK();
  NcclComm trainers(MPI_COMM_WORLD);
  const int rank = world_rank(), p = world_size();
  Stream s;
  // One ring over all ranks in reverse order, then every rank alone.
  for (bool alone : {false, true}) {
    std::vector<int> ring = {rank};
    int me = 0;
    if (!alone) {
      ring.clear();
      for (int r = p - 1; r >= 0; --r) ring.push_back(r);
      me = p - 1 - rank;
    }
    const size_t k = ring.size(), width = 3;  // entries of three int64 each
    auto entry = [](int trainer, size_t i) { return int64_t(1000 * trainer + 7 * int64_t(i) + 1); };
    std::vector<int64_t> host(k * width, -1);
    for (size_t i = 0; i < width; ++i) host[size_t(me) * width + i] = entry(rank, i);
    DeviceBuffer<int64_t> all(host);
    ring_all_gather(trainers.get(), ring, me, all.data(), width * sizeof(int64_t), s.s);
    wait_stream(s.s, trainers.get(), kTimeout, "the test ring all-gather");
    const std::vector<int64_t> got = all.download();
    int64_t bad = 0;
    for (size_t j = 0; j < k; ++j)
      for (size_t i = 0; i < width; ++i) bad += got[j * width + i] != entry(ring[j], i);
    EXPECT_EQ(bad, 0) << (alone ? "a ring of one" : "the ring of all ranks");
  }
}

void CUDART_CB slow_backward(void*) { std::this_thread::sleep_for(std::chrono::milliseconds(20)); }

TEST(GradReducer, EqualsOnePlainAllReduceOfTheWholeBuffer) {
  ML_REQUIRE_GPU_PER_RANK();
  NcclComm trainers(MPI_COMM_WORLD);
  const int rank = world_rank();
  const int64_t n = 100003;           // odd
  const int64_t bucket_elems = 9973;  // does not divide n: a short head bucket
  Pinned host(static_cast<size_t>(n)), got(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) host.p[i] = value(rank, i);

  // The reference: one plain all-reduce of the whole buffer.
  DeviceBuffer<float> ref(std::vector<float>(host.p, host.p + n));
  {
    Stream s;
    NCCL_CHECK(ncclAllReduce(ref.data(), ref.data(), size_t(n), ncclFloat32, ncclSum,
                             trainers.get(), s.s));
    wait_stream(s.s, trainers.get(), kTimeout, "the reference all-reduce");
  }
  const std::vector<float> want = ref.download();
  int64_t ref_bad = 0;
  for (int64_t i = 0; i < n; ++i) ref_bad += want[size_t(i)] != sum_over(all_ranks(), i);
  EXPECT_EQ(ref_bad, 0);

  Stream compute;
  DeviceBuffer<float> grads(static_cast<size_t>(n));
  GradReducer reducer(trainers.get(), grads.data(), n, compute.s,
                      size_t(bucket_elems) * sizeof(float));
  EXPECT_EQ(reducer.buckets().size(), size_t((n + bucket_elems - 1) / bucket_elems));
  for (int mode = 0; mode < 3; ++mode) {
    // Backward: NaN until written, slow to start, then tensors of odd sizes
    // from the end. A reduction that did not wait for its bucket's writes
    // would sum NaN; a compute stream that did not wait for the reductions
    // would read unreduced values.
    CUDA_CHECK(cudaMemsetAsync(grads.data(), 0xFF, size_t(n) * sizeof(float), compute.s));
    CUDA_CHECK(cudaLaunchHostFunc(compute.s, slow_backward, nullptr));
    auto write = [&](int64_t offset, int64_t count) {
      CUDA_CHECK(cudaMemcpyAsync(grads.data() + offset, host.p + offset,
                                 size_t(count) * sizeof(float), cudaMemcpyHostToDevice, compute.s));
    };
    if (mode == 0) {  // per tensor
      int64_t k = 0;
      for (int64_t end = n; end > 0; ++k) {
        const int64_t count = std::min<int64_t>(end, 4099 + 1000 * (k % 3));
        write(end - count, count);
        reducer.mark_ready(end - count, count);
        end -= count;
      }
    } else if (mode == 1) {  // per bucket
      for (size_t b = 0; b < reducer.buckets().size(); ++b) {
        write(reducer.buckets()[b].offset, reducer.buckets()[b].count);
        reducer.mark_bucket_ready(b);
      }
    } else {  // all at the end
      write(0, n);
      reducer.mark_all_ready();
    }
    reducer.finish();
    CUDA_CHECK(cudaMemcpyAsync(got.p, grads.data(), size_t(n) * sizeof(float),
                               cudaMemcpyDeviceToHost, compute.s));
    wait_stream(compute.s, trainers.get(), kTimeout, "the bucketed gradient all-reduce");
    int64_t bad = 0;
    for (int64_t i = 0; i < n; ++i) bad += got.p[i] != want[size_t(i)];
    EXPECT_EQ(bad, 0) << "marking mode " << mode;
  }
}

}  // namespace
}  // namespace meshloom::cuda
