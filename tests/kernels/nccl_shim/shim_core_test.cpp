// The NCCL shim's collectives on host buffers under mpirun, against values
// each rank can work out alone: what a GPU test relies on when it preloads
// the shim so that ranks sharing a GPU take the NCCL code paths.
#include "shim_core.hpp"

#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <numeric>
#include <vector>

namespace meshloom::nccl_shim {
namespace {

int rank_of(MPI_Comm c) {
  int r = 0;
  MPI_Comm_rank(c, &r);
  return r;
}
int size_of(MPI_Comm c) {
  int n = 0;
  MPI_Comm_size(c, &n);
  return n;
}

TEST(NcclShim, Bf16RoundsToNearestEvenLikeTheGpu) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(float_to_bf16(1.00390625f), 0x3F80);  // halfway, to the even 0x3F80
  EXPECT_EQ(float_to_bf16(1.01171875f), 0x3F82);  // halfway, to the even 0x3F82
  EXPECT_EQ(float_to_bf16(-2.5f), 0xC020);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
  EXPECT_EQ(bf16_to_float(0x4049), 3.140625f);
}

TEST(NcclShim, AllReduceSumsAndMaxesEveryType) {
  const MPI_Comm w = MPI_COMM_WORLD;
  const int r = rank_of(w), n = size_of(w);
  std::vector<float> f = {float(r), 0.5f * float(r + 1)}, f_out(2);
  all_reduce(f.data(), f_out.data(), 2, Elem::f32, ReduceOp::sum, w);
  EXPECT_EQ(f_out[0], float(n * (n - 1) / 2));
  EXPECT_EQ(f_out[1], 0.25f * float(n * (n + 1)));
  all_reduce(f.data(), f.data(), 2, Elem::f32, ReduceOp::max, w);  // in place
  EXPECT_EQ(f[0], float(n - 1));
  std::vector<double> d = {1e300 * (r == 0 ? 1 : -1)};
  all_reduce(d.data(), d.data(), 1, Elem::f64, ReduceOp::max, w);
  EXPECT_EQ(d[0], 1e300);
  std::vector<int64_t> i = {int64_t(1) << (40 + r)};
  all_reduce(i.data(), i.data(), 1, Elem::i64, ReduceOp::sum, w);
  EXPECT_EQ(i[0], ((int64_t(1) << n) - 1) << 40);
  // bf16: powers of two whose sum is exact in 8 bits of mantissa.
  std::vector<uint16_t> b = {float_to_bf16(float(1 << r)), float_to_bf16(-1.0f)};
  all_reduce(b.data(), b.data(), 2, Elem::bf16, ReduceOp::sum, w);
  EXPECT_EQ(bf16_to_float(b[0]), float((1 << n) - 1));
  EXPECT_EQ(bf16_to_float(b[1]), -float(n));
}

TEST(NcclShim, AllGatherInRankOrderAlsoInPlace) {
  const MPI_Comm w = MPI_COMM_WORLD;
  const int r = rank_of(w), n = size_of(w);
  std::vector<uint16_t> mine = {uint16_t(10 * r), uint16_t(10 * r + 1)}, all(2 * size_t(n));
  all_gather(mine.data(), all.data(), 2, Elem::bf16, w);
  for (int k = 0; k < n; ++k) {
    EXPECT_EQ(all[2 * k], 10 * k);
    EXPECT_EQ(all[2 * k + 1], 10 * k + 1);
  }
  std::vector<float> slots(size_t(n), -1.0f);
  slots[size_t(r)] = float(r * r);
  all_gather(slots.data() + r, slots.data(), 1, Elem::f32, w);  // send is recv's own slot
  for (int k = 0; k < n; ++k) EXPECT_EQ(slots[size_t(k)], float(k * k));
}

// A ring shift and a two-way exchange in one batch: every rank sends before
// it receives, which would deadlock with blocking calls.
TEST(NcclShim, GroupedTransfersRunTogether) {
  const MPI_Comm w = MPI_COMM_WORLD;
  const int r = rank_of(w), n = size_of(w);
  std::vector<int64_t> out = {r, 100 + r}, in(2, -1), back(1, -1), there = {1000 + r};
  std::vector<Transfer> batch = {{true, out.data(), sizeof(int64_t) * 2, (r + 1) % n},
                                 {false, in.data(), sizeof(int64_t) * 2, (r + n - 1) % n}};
  const int partner = r ^ 1;
  if (partner < n) {
    batch.push_back({true, there.data(), sizeof(int64_t), partner});
    batch.push_back({false, back.data(), sizeof(int64_t), partner});
  }
  run_transfers(batch, w);
  const int left = (r + n - 1) % n;
  EXPECT_EQ(in[0], left);
  EXPECT_EQ(in[1], 100 + left);
  if (partner < n) {
    EXPECT_EQ(back[0], 1000 + partner);
  }
}

}  // namespace
}  // namespace meshloom::nccl_shim
