// Ulysses and hybrid attention on the GPU (DeviceUlyssesAttention,
// device_hybrid_attention) against full attention on the CPU
// (lib/model/attention in double), as device_ring_test checks the ring:
// every rank holds a contiguous piece of the same packed documents (unequal
// pieces, an empty one in one case), and each rank's output, lse, dQ and its
// own keys' dK/dV must equal the corresponding rows of the full computation.
// 8 query heads on 2 KV heads: over 4 members each gets 2 query heads and a
// KV head that two members share (the CPU's rule), over 2 members 4 and one.
// Two layers run on one object, as in the model. MPI through host memory
// wherever ranks share a GPU; NCCL where each has its own. On cuDNN (bf16,
// AttentionImpl::cudnn) Ulysses' and hybrid's forward must run cuDNN (not
// fall back) and the results stay full attention's to bf16 tolerance;
// skipped where cuDNN cannot run.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <deque>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

#include "base/check.hpp"
#include "kernels/device/common/check.cuh"
#include "kernels/host/comm/nccl_comm.hpp"
#include "kernels/host/model/device_ulysses_attention.hpp"
#include "tests/kernels/attention_test_util.hpp"
#include "tests/kernels/host/model/cp_test_problem.hpp"
#include "tests/kernels/nccl_test.hpp"

namespace {

using namespace meshloom::cuda;
using namespace meshloom::cuda::test;

template <class T>
using Factory = std::function<std::unique_ptr<DeviceAttention<T>>()>;

// Forward over kLayers layers on one object, then backward in reverse, and
// each layer's results against the full computation's rows.
// `pad`: extra columns per row; `check`: looks at the object after the run.
template <class T>
void expect_full_attention(const Problem& p, const Factory<T>& make, double tol, int pad = 3,
                           const std::function<void(DeviceAttention<T>&)>& check = {}) {
  cudaStream_t stream = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  {
    const std::unique_ptr<DeviceAttention<T>> attn = make();
    const DeviceBlock<T> dev(kDims, p.mine, pad);  // padded rows: strided packs
    CUDA_CHECK(cudaDeviceSynchronize());
    const int64_t m = p.mine.n();
    std::deque<DeviceBuf<T>> out;
    std::deque<DeviceBuf<float>> lse, dq, dk, dv;
    for (int l = 0; l < kLayers; ++l) {
      out.emplace_back(m * kQw);
      lse.emplace_back(m * kDims.n_heads);
      dq.emplace_back(m * kQw);
      dk.emplace_back(m * kKw);
      dv.emplace_back(m * kKw);
      attn->forward(l, kDims, dev.query(), dev.keys(),
                    FlashOut<T>{out.back().get(), kQw, lse.back().get()}, stream);
    }
    for (int l = kLayers - 1; l >= 0; --l) {
      const size_t i = size_t(l);
      for (DeviceBuf<float>* g : {&dq[i], &dk[i], &dv[i]})
        CUDA_CHECK(cudaMemsetAsync(g->get(), 0, size_t(g->size()) * sizeof(float), stream));
      attn->backward(l, kDims, dev.query(), dev.keys(), out[i].get(), kQw, lse[i].get(),
                     dev.dout.get(), dev.ldq, dq[i].get(), kQw,
                     FlashKvGrad{dk[i].get(), dv[i].get(), kKw, kKw}, stream);
    }
    CUDA_CHECK(cudaStreamSynchronize(stream));
    if (check) check(*attn);
    for (size_t l = 0; l < size_t(kLayers); ++l) {
      SCOPED_TRACE("layer " + std::to_string(l) + ", rank " + std::to_string(world_rank()));
      EXPECT_LE(rel_error(download(out[l]), rows_of(p.out, kQw, p.lo, p.hi)), tol) << "out";
      int64_t mismatches = 0;
      EXPECT_LE(lse_error(download(lse[l]), rows_of(p.lse, kDims.n_heads, p.lo, p.hi), &mismatches),
                tol);
      EXPECT_EQ(mismatches, 0);
      EXPECT_LE(rel_error(download(dq[l]), rows_of(p.dq, kQw, p.lo, p.hi)), tol) << "dq";
      EXPECT_LE(rel_error(download(dk[l]), rows_of(p.dk, kKw, p.lo, p.hi)), tol) << "dk";
      EXPECT_LE(rel_error(download(dv[l]), rows_of(p.dv, kKw, p.lo, p.hi)), tol) << "dv";
    }
  }
  CUDA_CHECK(cudaStreamDestroy(stream));
}

template <class T>
void ulysses_equals_full_attention(double tol, bool first_empty, ncclComm_t nccl = nullptr) {
  const Problem p(std::is_same_v<T, bf16>, first_empty, 23);
  expect_full_attention<T>(
      p, [&] { return std::make_unique<DeviceUlyssesAttention<T>>(MPI_COMM_WORLD, 60.0, nccl); },
      tol);
}

// cuDNN ran on this member's gathered blocks.
void expect_cudnn_ran(DeviceAttention<bf16>& attn) {
  auto* ulysses = dynamic_cast<DeviceUlyssesAttention<bf16>*>(&attn);
  ASSERT_NE(ulysses, nullptr);
  EXPECT_GT(ulysses->cudnn_passes(), 0) << "the flash kernels ran instead";
}

}  // namespace

TEST(DeviceUlysses, Bf16CudnnUlyssesEqualsFullAttention) {
  ML_REQUIRE_GPU();
  std::string why;
  if (!cudnn_attention_available(&why)) GTEST_SKIP() << why;
  const Problem p(true, false, 23);
  expect_full_attention<bf16>(
      p,
      [&] {
        return std::make_unique<DeviceUlyssesAttention<bf16>>(MPI_COMM_WORLD, 60.0, nullptr,
                                                              nullptr, AttentionImpl::cudnn);
      },
      1e-2, 8, expect_cudnn_ran);
}

TEST(DeviceUlysses, Bf16CudnnHybridEqualsFullAttention) {
  ML_REQUIRE_GPU();
  std::string why;
  if (!cudnn_attention_available(&why)) GTEST_SKIP() << why;
  const int size = world_size(), rank = world_rank();
  if (size % 2 != 0) GTEST_SKIP() << "hybrid subgroups of 2 need an even group";
  MPI_Comm sub = MPI_COMM_NULL;
  ASSERT_EQ(MPI_Comm_split(MPI_COMM_WORLD, rank / 2, rank, &sub), MPI_SUCCESS);
  const Problem p(true, false, 23);
  expect_full_attention<bf16>(
      p,
      [&] {
        return device_hybrid_attention<bf16>(MPI_COMM_WORLD, sub, 2, p.all.n(), 60.0, nullptr,
                                             nullptr, AttentionImpl::cudnn);
      },
      1e-2, 8, expect_cudnn_ran);
  MPI_Comm_free(&sub);
}

TEST(DeviceUlysses, HeadsFollowTheCpuRule) {
  // The rule itself is model/ulysses_heads.hpp's (tested by UlyssesHeads.*):
  // the flash dims reach it whole. H=24, Hk=6, k=4: member 1 gets KV heads 1, 2, 2.
  const meshloom::model::UlyssesHeads h = device_ulysses_heads(FlashDims{24, 6, 64}, 4);
  EXPECT_EQ(h.q, 6);
  EXPECT_EQ(h.v, 3);
  EXPECT_EQ((std::vector<int64_t>{h.kv_head(1, 0), h.kv_head(1, 1), h.kv_head(1, 2)}),
            (std::vector<int64_t>{1, 2, 2}));
  EXPECT_THROW(device_ulysses_heads(FlashDims{8, 2, 64}, 3), meshloom::Error);
}

TEST(DeviceUlysses, Fp32UlyssesEqualsFullAttention) {
  ML_REQUIRE_GPU();
  ulysses_equals_full_attention<float>(1e-5, false);
}

TEST(DeviceUlysses, Bf16UlyssesEqualsFullAttention) {
  ML_REQUIRE_GPU();
  ulysses_equals_full_attention<bf16>(1e-2, false);
}

TEST(DeviceUlysses, UlyssesWithAnEmptyMemberEqualsFullAttention) {
  ML_REQUIRE_GPU();
  ulysses_equals_full_attention<float>(1e-5, true);
}

TEST(DeviceUlysses, HybridEqualsFullAttention) {
  ML_REQUIRE_GPU();
  const int size = world_size(), rank = world_rank();
  if (size % 2 != 0) GTEST_SKIP() << "hybrid subgroups of 2 need an even group";
  MPI_Comm sub = MPI_COMM_NULL;
  ASSERT_EQ(MPI_Comm_split(MPI_COMM_WORLD, rank / 2, rank, &sub), MPI_SUCCESS);
  const Problem p(false, false, 23);
  expect_full_attention<float>(
      p, [&] { return device_hybrid_attention<float>(MPI_COMM_WORLD, sub, 2, p.all.n(), 60.0); },
      1e-5);
  MPI_Comm_free(&sub);
}

TEST(DeviceUlysses, Fp32NcclUlyssesEqualsFullAttention) {
  ML_REQUIRE_GPU_PER_RANK();
  NcclComm group(MPI_COMM_WORLD);
  ulysses_equals_full_attention<float>(1e-5, false, group.get());
}
