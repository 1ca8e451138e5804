// Ring attention on the GPU (DeviceRingAttention) against full attention on
// the CPU (lib/model/attention in double): every rank holds a contiguous
// piece of the same packed documents (pieces cut across documents), the ring
// runs over all ranks (which may share one GPU), and each rank's output, lse,
// dQ and its own keys' dK/dV must equal the corresponding rows of the full
// computation. fp32 to 1e-5, bf16 to 1e-2 (relative to the largest value).
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <numeric>
#include <vector>

#include "kernels/model/device_ring_attention.hpp"
#include "tests/kernels/attention/attention_test_util.hpp"
#include "tests/kernels/gpu_test.hpp"

namespace {

using namespace meshloom::kernels;
using namespace meshloom::kernels::test;

std::vector<double> rows_of(const std::vector<double>& all, int64_t width, int64_t lo, int64_t hi) {
  return std::vector<double>(all.begin() + lo * width, all.begin() + hi * width);
}

template <class T>
void ring_equals_full_attention(double tol) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const FlashDims dims{8, 2, 64};
  const int64_t qw = int64_t{dims.n_heads} * dims.head_dim;
  const int64_t kw = int64_t{dims.n_kv_heads} * dims.head_dim;
  const Block all = make_packed(dims, {300, 45, 129, 1, 77}, 17, std::is_same_v<T, bf16>);
  const int64_t n = all.n(), lo = n * rank / size, hi = n * (rank + 1) / size;
  std::vector<int64_t> rows(static_cast<size_t>(hi - lo));
  std::iota(rows.begin(), rows.end(), lo);
  const Block mine = take_rows(dims, all, rows);

  std::vector<double> out_all, lse_all;
  cpu_forward(dims, all, all, out_all, lse_all);
  const std::vector<double> delta_all = cpu_delta(dims, all, out_all);
  std::vector<double> dq_all(static_cast<size_t>(n * qw)), dk_all(static_cast<size_t>(n * kw)),
      dv_all(static_cast<size_t>(n * kw));
  cpu_backward(dims, all, all, lse_all, delta_all, dq_all, dk_all, dv_all);

  std::vector<int> members(static_cast<size_t>(size));
  std::iota(members.begin(), members.end(), 0);
  DeviceRingAttention<T> ring(MPI_COMM_WORLD, members, rank, n, 60.0);
  const DeviceBlock<T> dev(dims, mine, 3);  // padded rows: the strided pack
  const int64_t m = mine.n();
  DeviceBuf<T> out(m * qw);
  DeviceBuf<float> lse(m * dims.n_heads), dq(m * qw), dk(m * kw), dv(m * kw);
  ring.forward(0, dims, dev.query(), dev.keys(), FlashOut<T>{out.get(), qw, lse.get()}, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_LE(rel_error(download(out), rows_of(out_all, qw, lo, hi)), tol) << "out, rank " << rank;
  int64_t mismatches = 0;
  EXPECT_LE(lse_error(download(lse), rows_of(lse_all, dims.n_heads, lo, hi), &mismatches), tol);
  EXPECT_EQ(mismatches, 0);

  for (DeviceBuf<float>* g : {&dq, &dk, &dv})
    ASSERT_EQ(cudaMemset(g->get(), 0, size_t(g->size()) * sizeof(float)), cudaSuccess);
  ring.backward(0, dims, dev.query(), dev.keys(), out.get(), qw, lse.get(), dev.dout.get(), dev.ldq,
                dq.get(), qw, FlashKvGrad{dk.get(), dv.get(), kw, kw}, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_LE(rel_error(download(dq), rows_of(dq_all, qw, lo, hi)), tol) << "dq, rank " << rank;
  EXPECT_LE(rel_error(download(dk), rows_of(dk_all, kw, lo, hi)), tol) << "dk, rank " << rank;
  EXPECT_LE(rel_error(download(dv), rows_of(dv_all, kw, lo, hi)), tol) << "dv, rank " << rank;
}

}  // namespace

TEST(DeviceRing, Fp32RingEqualsFullAttention) {
  ML_REQUIRE_GPU();
  ring_equals_full_attention<float>(1e-5);
}

TEST(DeviceRing, Bf16RingEqualsFullAttention) {
  ML_REQUIRE_GPU();
  ring_equals_full_attention<bf16>(1e-2);
}
