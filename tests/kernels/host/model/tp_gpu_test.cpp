// The tensor-parallel GPU model (tp 2) against the CPU whole model (the
// definition, in double): two MPI ranks, each a TP rank holding its shard
// (ParamLayout(shape, {2, rank})) of the same parameters, run the same packed
// micro-batch. The loss and every token's loss must be the CPU's, and each
// rank's gradients its shard of the CPU's: fp32 to 1e-4 of each tensor's
// largest gradient, bf16 to 5e-2. Replicated results (the loss, the norm
// gains' gradients) must be bitwise equal on both ranks: the trainer never
// reduces them over the TP group.
//
// The TP collectives go through host memory (mpi_tp_comm: the ranks share
// the GPU, as in the one-GPU invariance runs) and, where each rank has a GPU
// of its own, over NCCL. The loss runs in chunks of 100 tokens (257 tokens:
// three chunks, the statistics reduced per chunk); 4 query heads on 2 KV
// heads split to 2 on 1, and the vocabulary of 301 unevenly.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <memory>
#include <span>
#include <vector>

#include "kernels/host/comm/nccl_comm.hpp"
#include "kernels/host/model/device_tp_comm.hpp"
#include "kernels/host/model/transformer.hpp"
#include "model/transformer.hpp"
#include "tests/kernels/device/ops/ops_test_util.hpp"
#include "tests/kernels/host/model/model_test_util.hpp"
#include "tests/kernels/nccl_test.hpp"

namespace {

using namespace meshloom;
using namespace meshloom::cuda::test;
using cuda::world_rank;
using cuda::world_size;

enum class Transport { mpi, nccl };

// This shard's part of a whole-model buffer (`whole` in `full`'s layout).
template <class V>
std::vector<V> shard_of(const model::ParamLayout& mine, const model::ParamLayout& full,
                        std::span<const V> whole) {
  std::vector<V> out(size_t(mine.numel()));
  for (size_t i = 0; i < full.tensors().size(); ++i) {
    const model::TensorInfo& t = mine.tensors()[i];
    model::take_shard(t, whole.data() + full.tensors()[i].offset, out.data() + t.offset);
  }
  return out;
}

// Whether `values` are the same bits on every rank.
template <class V>
bool same_on_every_rank(const std::vector<V>& values) {
  const int bytes = int(values.size() * sizeof(V));
  std::vector<char> all(size_t(bytes) * size_t(world_size()));
  MPI_Allgather(values.data(), bytes, MPI_BYTE, all.data(), bytes, MPI_BYTE, MPI_COMM_WORLD);
  for (int r = 1; r < world_size(); ++r)
    if (!std::equal(all.begin(), all.begin() + bytes, all.begin() + size_t(r) * size_t(bytes)))
      return false;
  return true;
}

template <class T>
void compare_tp(bool tied, double tol, Transport transport) {
  const model::Shape s = small_shape(tied, 4, 2);
  model::Transformer<double> cpu(s, {.threads = 1});
  const std::vector<float> params = random_params(cpu.layout());
  std::copy(params.begin(), params.end(), cpu.params().begin());
  const model::Batch batch = packed_batch(s.vocab);
  const double scale = 1.0 / double(batch.predictions());
  cpu.zero_grads();
  const model::LossSum want = cpu.forward(batch);
  cpu.backward(scale);

  const model::TpShard shard{2, world_rank()};
  const model::ParamLayout mine(s, shard);
  const std::vector<float> my_params = shard_of<float>(mine, cpu.layout(), params);
  const std::vector<double> want_grads = shard_of<double>(mine, cpu.layout(), cpu.grads());
  std::unique_ptr<cuda::NcclComm> nccl;  // sets this rank's device
  std::unique_ptr<cuda::DeviceTpComm<T>> tp;
  if (transport == Transport::nccl) {
    nccl = std::make_unique<cuda::NcclComm>(MPI_COMM_WORLD);
    tp = cuda::nccl_tp_comm<T>(nccl->get());
  } else {
    tp = cuda::mpi_tp_comm<T>(MPI_COMM_WORLD);
  }
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  {
    cuda::Transformer<T> gpu(s, stream, 100, shard, tp.get());
    gpu.set_params(my_params);
    const GpuRun run = run_against_cpu(gpu, batch, scale, want, cpu.token_losses(), tol);
    const std::vector<float>& grads = run.grads;
    std::vector<float> replicated;
    for (const model::TensorInfo& t : mine.tensors()) {
      const auto first = grads.begin() + t.offset, last = first + t.numel;
      const auto want_first = want_grads.begin() + t.offset;
      EXPECT_LE(max_rel_error(std::vector<double>(first, last),
                              std::vector<double>(want_first, want_first + t.numel)),
                tol)
          << t.name << " on TP rank " << shard.rank;
      if (t.split_dim < 0) replicated.insert(replicated.end(), first, last);
    }
    EXPECT_TRUE(same_on_every_rank(run.token_losses)) << "token losses differ between TP ranks";
    EXPECT_TRUE(same_on_every_rank(replicated)) << "norm gains' gradients differ between TP ranks";
  }
  cudaStreamDestroy(stream);
}

}  // namespace

#define ML_REQUIRE_TWO_RANKS() \
  if (world_size() != 2) GTEST_SKIP() << "needs 2 ranks (one TP group of 2)"

TEST(GpuTensorParallel, Fp32MatchesTheCpuModelThroughHostMemory) {
  ML_REQUIRE_TWO_RANKS();
  ML_REQUIRE_GPU();
  compare_tp<float>(true, 1e-4, Transport::mpi);
}

TEST(GpuTensorParallel, Fp32UntiedMatchesTheCpuModelThroughHostMemory) {
  ML_REQUIRE_TWO_RANKS();
  ML_REQUIRE_GPU();
  compare_tp<float>(false, 1e-4, Transport::mpi);
}

TEST(GpuTensorParallel, Bf16MatchesTheCpuModelThroughHostMemory) {
  ML_REQUIRE_TWO_RANKS();
  ML_REQUIRE_GPU();
  compare_tp<__nv_bfloat16>(false, 5e-2, Transport::mpi);
}

TEST(GpuTensorParallel, Fp32MatchesTheCpuModelOverNccl) {
  ML_REQUIRE_TWO_RANKS();
  ML_REQUIRE_GPU_PER_RANK();
  compare_tp<float>(true, 1e-4, Transport::nccl);
}
