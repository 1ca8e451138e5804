// Ring attention on the GPU (DeviceRingAttention) against full attention on
// the CPU (lib/model/attention in double): every rank holds a contiguous
// piece of the same packed documents (pieces cut across documents and of
// unequal sizes, so every shift moves blocks of its own size), the ring runs
// over all ranks, and each rank's output, lse, dQ and its own keys' dK/dV
// must equal the corresponding rows of the full computation. fp32 to 1e-5,
// bf16 to 1e-2 (relative to the largest value). Two layers run on one ring
// object, as in the model.
//
// The MPI transport runs wherever ranks share a GPU. The NCCL transport needs
// one GPU per rank (NCCL refuses two ranks on one GPU; every rank decides the
// same, nccl_usable being collective), so on a one-GPU machine it runs as a
// ring of one at np1. It must give the MPI ring's numbers: forward bitwise;
// backward to 1e-5, as its fp32 atomics add in a varying order even within
// one transport.
//
// The ring on cuDNN (bf16, AttentionImpl::cudnn: per-step passes over the
// pieces' documents, some cut mid-document so steps hold full and causal
// sections) must equal full attention and the flash ring to bf16 tolerance,
// and must have run cuDNN rather than fallen back; skipped where cuDNN
// cannot run.#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <deque>
#include <numeric>
#include <string>
#include <vector>

#include "base/check.hpp"
#include "kernels/device/common/check.cuh"
#include "kernels/host/comm/nccl_comm.hpp"
#include "kernels/host/model/attention_choice.hpp"
#include "kernels/host/model/device_ring_attention.hpp"
#include "tests/kernels/attention_test_util.hpp"
#include "tests/kernels/host/model/cp_test_problem.hpp"
#include "tests/kernels/nccl_test.hpp"

namespace {

using namespace meshloom::cuda;
using namespace meshloom::cuda::test;

// Entries that differ at all (-inf equals -inf).
int64_t differences(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return int64_t(std::max(a.size(), b.size()));
  int64_t d = 0;
  for (size_t i = 0; i < a.size(); ++i) d += !(a[i] == b[i]);
  return d;
}

// What one layer's ring gives this rank.
struct LayerResult {
  std::vector<double> out, lse, dq, dk, dv;
};

// One layer's outputs and gradients on the device, for m rows.
template <class T>
struct LayerBuffers {
  explicit LayerBuffers(int64_t m)
      : out(m * kQw), lse(m * kDims.n_heads), dq(m * kQw), dk(m * kKw), dv(m * kKw) {}
  DeviceBuf<T> out;
  DeviceBuf<float> lse, dq, dk, dv;
};

// Forward over kLayers layers on one ring object, then backward in reverse,
// on a non-blocking stream as in the model; every layer sees the same inputs.
// `pad`: extra columns per row (cuDNN needs rows of whole 16 bytes);
// `cudnn_passes`: where to put the ring's cuDNN graph calls.
template <class T>
std::vector<LayerResult> run_ring(const Problem& p, ncclComm_t nccl,
                                  AttentionImpl impl = AttentionImpl::flash, int pad = 3,
                                  int64_t* cudnn_passes = nullptr) {
  std::vector<int> members(static_cast<size_t>(world_size()));
  std::iota(members.begin(), members.end(), 0);
  cudaStream_t stream = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::vector<LayerResult> results(kLayers);
  {
    DeviceRingAttention<T> ring(MPI_COMM_WORLD, members, world_rank(), p.all.n(), 60.0, nccl, impl);
    const DeviceBlock<T> dev(kDims, p.mine, pad);  // padded rows: the strided pack
    CUDA_CHECK(cudaDeviceSynchronize());           // its uploads ran on the legacy stream
    std::deque<LayerBuffers<T>> bufs;
    for (int l = 0; l < kLayers; ++l) bufs.emplace_back(p.mine.n());
    for (int l = 0; l < kLayers; ++l) {
      LayerBuffers<T>& b = bufs[size_t(l)];
      ring.forward(l, kDims, dev.query(), dev.keys(), FlashOut<T>{b.out.get(), kQw, b.lse.get()},
                   stream);
    }
    for (int l = kLayers - 1; l >= 0; --l) {
      LayerBuffers<T>& b = bufs[size_t(l)];
      for (DeviceBuf<float>* g : {&b.dq, &b.dk, &b.dv})
        CUDA_CHECK(cudaMemsetAsync(g->get(), 0, size_t(g->size()) * sizeof(float), stream));
      ring.backward(l, kDims, dev.query(), dev.keys(), b.out.get(), kQw, b.lse.get(),
                    dev.dout.get(), dev.ldq, b.dq.get(), kQw,
                    FlashKvGrad{b.dk.get(), b.dv.get(), kKw, kKw}, stream);
    }
    CUDA_CHECK(cudaStreamSynchronize(stream));
    if (cudnn_passes) *cudnn_passes = ring.cudnn_passes();
    for (size_t i = 0; i < size_t(kLayers); ++i) {
      const LayerBuffers<T>& b = bufs[i];
      results[i] = {download(b.out), download(b.lse), download(b.dq), download(b.dk),
                    download(b.dv)};
    }
  }
  CUDA_CHECK(cudaStreamDestroy(stream));
  return results;
}

void expect_full_attention(const Problem& p, const std::vector<LayerResult>& got, double tol,
                           const char* transport) {
  const int rank = world_rank();
  for (size_t l = 0; l < got.size(); ++l) {
    const LayerResult& r = got[l];
    SCOPED_TRACE(std::string(transport) + ", layer " + std::to_string(l) + ", rank " +
                 std::to_string(rank));
    EXPECT_LE(rel_error(r.out, rows_of(p.out, kQw, p.lo, p.hi)), tol) << "out";
    int64_t mismatches = 0;
    EXPECT_LE(lse_error(r.lse, rows_of(p.lse, kDims.n_heads, p.lo, p.hi), &mismatches), tol);
    EXPECT_EQ(mismatches, 0);
    EXPECT_LE(rel_error(r.dq, rows_of(p.dq, kQw, p.lo, p.hi)), tol) << "dq";
    EXPECT_LE(rel_error(r.dk, rows_of(p.dk, kKw, p.lo, p.hi)), tol) << "dk";
    EXPECT_LE(rel_error(r.dv, rows_of(p.dv, kKw, p.lo, p.hi)), tol) << "dv";
  }
  // Forward has no atomics: every layer gives the same bits.
  for (size_t l = 1; l < got.size(); ++l) {
    EXPECT_EQ(differences(got[l].out, got[0].out), 0) << transport << ", layer " << l;
    EXPECT_EQ(differences(got[l].lse, got[0].lse), 0) << transport << ", layer " << l;
  }
}

template <class T>
void mpi_ring_equals_full_attention(double tol, bool first_empty) {
  const Problem p(std::is_same_v<T, bf16>, first_empty, 17);
  expect_full_attention(p, run_ring<T>(p, nullptr), tol, "MPI");
}

template <class T>
void nccl_ring_equals_full_attention_and_the_mpi_ring(double tol, bool first_empty) {
  NcclComm trainers(MPI_COMM_WORLD);
  const Problem p(std::is_same_v<T, bf16>, first_empty, 17);
  const std::vector<LayerResult> mpi = run_ring<T>(p, nullptr);
  const std::vector<LayerResult> nccl = run_ring<T>(p, trainers.get());
  expect_full_attention(p, nccl, tol, "NCCL");
  for (size_t l = 0; l < nccl.size(); ++l) {
    SCOPED_TRACE("NCCL against MPI, layer " + std::to_string(l) + ", rank " +
                 std::to_string(world_rank()));
    EXPECT_EQ(differences(nccl[l].out, mpi[l].out), 0) << "out";
    EXPECT_EQ(differences(nccl[l].lse, mpi[l].lse), 0) << "lse";
    EXPECT_LE(rel_error(nccl[l].dq, mpi[l].dq), 1e-5) << "dq";
    EXPECT_LE(rel_error(nccl[l].dk, mpi[l].dk), 1e-5) << "dk";
    EXPECT_LE(rel_error(nccl[l].dv, mpi[l].dv), 1e-5) << "dv";
  }
}

void cudnn_ring_equals_full_attention_and_the_flash_ring(bool first_empty) {
  std::string why;
  if (!cudnn_attention_available(&why)) GTEST_SKIP() << why;
  const Problem p(true, first_empty, 17);
  int64_t passes = 0;
  const std::vector<LayerResult> flash = run_ring<bf16>(p, nullptr, AttentionImpl::flash, 8);
  const std::vector<LayerResult> cudnn =
      run_ring<bf16>(p, nullptr, AttentionImpl::cudnn, 8, &passes);
  if (p.mine.n() > 0) {
    EXPECT_GT(passes, 0) << "every step fell back to the flash kernels";
  }
  expect_full_attention(p, cudnn, 1e-2, "cuDNN");
  for (size_t l = 0; l < cudnn.size(); ++l) {
    SCOPED_TRACE("cuDNN against flash, layer " + std::to_string(l) + ", rank " +
                 std::to_string(world_rank()));
    EXPECT_LE(rel_error(cudnn[l].out, flash[l].out), 1e-2) << "out";
    int64_t mismatches = 0;
    EXPECT_LE(lse_error(cudnn[l].lse, flash[l].lse, &mismatches), 1e-2) << "lse";
    EXPECT_EQ(mismatches, 0);
    EXPECT_LE(rel_error(cudnn[l].dq, flash[l].dq), 1e-2) << "dq";
    EXPECT_LE(rel_error(cudnn[l].dk, flash[l].dk), 1e-2) << "dk";
    EXPECT_LE(rel_error(cudnn[l].dv, flash[l].dv), 1e-2) << "dv";
  }
}

}  // namespace

TEST(DeviceRing, Bf16CudnnRingEqualsFullAttentionAndTheFlashRing) {
  ML_REQUIRE_GPU();
  cudnn_ring_equals_full_attention_and_the_flash_ring(false);
}

TEST(DeviceRing, CudnnRingWithAnEmptyMemberEqualsFullAttentionAndTheFlashRing) {
  ML_REQUIRE_GPU();
  cudnn_ring_equals_full_attention_and_the_flash_ring(true);
}

TEST(DeviceRing, Fp32RingEqualsFullAttention) {
  ML_REQUIRE_GPU();
  mpi_ring_equals_full_attention<float>(1e-5, false);
}

TEST(DeviceRing, Bf16RingEqualsFullAttention) {
  ML_REQUIRE_GPU();
  mpi_ring_equals_full_attention<bf16>(1e-2, false);
}

TEST(DeviceRing, RingWithAnEmptyMemberEqualsFullAttention) {
  ML_REQUIRE_GPU();
  mpi_ring_equals_full_attention<float>(1e-5, true);
}

TEST(DeviceRing, Fp32NcclRingEqualsFullAttentionAndTheMpiRing) {
  ML_REQUIRE_GPU_PER_RANK();
  nccl_ring_equals_full_attention_and_the_mpi_ring<float>(1e-5, false);
}

TEST(DeviceRing, Bf16NcclRingEqualsFullAttentionAndTheMpiRing) {
  ML_REQUIRE_GPU_PER_RANK();
  nccl_ring_equals_full_attention_and_the_mpi_ring<bf16>(1e-2, false);
}

TEST(DeviceRing, NcclRingWithAnEmptyMemberEqualsFullAttentionAndTheMpiRing) {
  ML_REQUIRE_GPU_PER_RANK();
  nccl_ring_equals_full_attention_and_the_mpi_ring<float>(1e-5, true);
}

TEST(DeviceRing, NcclRingRefusesMembersThatAreNotItsRanks) {
  ML_REQUIRE_GPU_PER_RANK();
  NcclComm trainers(MPI_COMM_WORLD);
  const int rank = world_rank(), size = world_size();
  // A rank outside the communicator; this rank at another member's place.
  EXPECT_THROW(DeviceRingAttention<float>(MPI_COMM_WORLD, {size}, 0, 8, 60.0, trainers.get()),
               meshloom::Error);
  if (size > 1) {
    EXPECT_THROW(DeviceRingAttention<float>(MPI_COMM_WORLD, {(rank + 1) % size, rank}, 0, 8, 60.0,
                                            trainers.get()),
                 meshloom::Error);
  }
}
