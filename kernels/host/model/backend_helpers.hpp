// Small pieces of the CUDA backend (cuda_backend.cpp) that need none of its
// state: the planner's offloaded layer count, a communicator's ranks in its
// parent, the measured product rate.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "base/check.hpp"
#include "comm/mpi_check.hpp"
#include "kernels/device/common/check.cuh"
#include "kernels/host/blas/gemm.hpp"
#include "kernels/host/device_buffer.hpp"

namespace meshloom::cuda {

// Layers whose activations wait in host memory for the plan's offload ratio
// r: the planner's count (plan/plan.hpp), 2 + (1 − r)·(layers − 2) layers
// stay resident; the store keeps the last two offloaded ones on the device.
inline int offloaded_layers(int layers, float offload) {
  return offload > 0 ? std::min(layers, 2 + int(std::lround(offload * double(layers - 2)))) : 0;
}

// The ranks in `parent` of `comm`'s members, in `comm`'s rank order; fails
// with `outside` when one is not in `parent`.
inline std::vector<int> ranks_in_parent(MPI_Comm comm, MPI_Comm parent, const char* outside) {
  MPI_Group group, parents;
  MPI_CHECK(MPI_Comm_group(comm, &group));
  MPI_CHECK(MPI_Comm_group(parent, &parents));
  int k = 0;
  MPI_CHECK(MPI_Group_size(group, &k));
  std::vector<int> ranks(static_cast<size_t>(k)), out(static_cast<size_t>(k));
  std::iota(ranks.begin(), ranks.end(), 0);
  MPI_CHECK(MPI_Group_translate_ranks(group, k, ranks.data(), parents, out.data()));
  MPI_CHECK(MPI_Group_free(&group));
  MPI_CHECK(MPI_Group_free(&parents));
  for (int r : out) ML_CHECK(r != MPI_UNDEFINED, outside);
  return out;
}

// The device's dense product rate in T (FLOP/s): the best of three large
// cuBLAS products after a warm-up.
template <class T>
double measure_gemm_peak(cudaStream_t stream) {
  const int64_t n = 8192;
  const Dtype t = dtype_of<T>();
  DeviceBuffer<T> a(size_t(n * n)), b(size_t(n * n)), c(size_t(n * n));
  a.zero(stream);
  b.zero(stream);
  Blas blas(stream);
  double peak = 0;
  for (int rep = 0; rep < 4; ++rep) {  // the first warms up
    CUDA_CHECK(cudaStreamSynchronize(stream));
    const auto t0 = std::chrono::steady_clock::now();
    blas.gemm(model::Op::N, model::Op::N, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(),
              n, t, t);
    CUDA_CHECK(cudaStreamSynchronize(stream));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rep > 0) peak = std::max(peak, 2.0 * double(n) * double(n) * double(n) / s);
  }
  return peak;
}

}  // namespace meshloom::cuda
