#include "kernels/host/comm/nccl_comm.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include "base/check.hpp"
#include "base/log.hpp"
#include "comm/mpi_check.hpp"
#include "kernels/device/common/check.cuh"
#include "kernels/device/device_info.hpp"

namespace meshloom::cuda {

NodeRanks node_ranks(MPI_Comm comm) {
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  MPI_Comm node = MPI_COMM_NULL;
  MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
  NodeRanks out;
  MPI_CHECK(MPI_Comm_rank(node, &out.local_rank));
  MPI_CHECK(MPI_Comm_size(node, &out.local_size));
  MPI_CHECK(MPI_Comm_free(&node));
  return out;
}

namespace {

// The test-only NCCL over MPI (tests/kernels/nccl_shim), when preloaded, makes
// communicators from MPI ones and lets ranks share a GPU.
using ShimInit = ncclResult_t (*)(ncclComm_t*, MPI_Comm);
ShimInit nccl_shim_init() {
  return reinterpret_cast<ShimInit>(dlsym(RTLD_DEFAULT, "meshloom_nccl_shim_init"));
}

}  // namespace

bool nccl_usable(MPI_Comm comm, std::string* why) {
  const NodeRanks node = node_ranks(comm);
  std::string local_why;
  const int devices = device_count(&local_why);
  const bool shares_ok = nccl_shim_init() != nullptr;
  // One reduction: {not usable here, -devices, ranks on the node}, by MAX.
  int mine[3] = {devices == 0 || (node.local_size > devices && !shares_ok) ? 1 : 0, -devices,
                 node.local_size};
  int all[3] = {0, 0, 0};
  MPI_CHECK(MPI_Allreduce(mine, all, 3, MPI_INT, MPI_MAX, comm));
  if (all[0] == 0) return true;
  if (why) {
    *why = "NCCL needs one GPU per rank: a node has up to " + std::to_string(all[2]) +
           " ranks here and the fewest visible GPUs on a node is " + std::to_string(-all[1]);
    if (devices == 0) *why += " (this rank: " + local_why + ")";
  }
  return false;
}

NcclComm::NcclComm(MPI_Comm comm, int device) {
  MPI_CHECK(MPI_Comm_rank(comm, &rank_));
  MPI_CHECK(MPI_Comm_size(comm, &size_));
  // Always collective, whether or not a device was given, so that ranks
  // passing different arguments still make the same MPI calls.
  const NodeRanks node = node_ranks(comm);
  if (device < 0) {
    int count = 0;
    CUDA_CHECK(cudaGetDeviceCount(&count));
    ML_CHECK(count > 0, "no CUDA device for the NCCL communicator");
    device = node.local_rank % count;
  }
  device_ = device;
  CUDA_CHECK(cudaSetDevice(device_));  // NCCL binds the communicator to the current device
  if (const ShimInit shim = nccl_shim_init()) {
    NCCL_CHECK(shim(&comm_, comm));
    return;
  }
  ncclUniqueId id{};
  if (rank_ == 0) NCCL_CHECK(ncclGetUniqueId(&id));
  MPI_CHECK(MPI_Bcast(&id, int(sizeof(id)), MPI_BYTE, 0, comm));
  // Some MPIs finish a broadcast only on a later MPI call, and
  // ncclCommInitRank makes none: a barrier completes it on every rank.
  MPI_CHECK(MPI_Barrier(comm));
  NCCL_CHECK(ncclCommInitRank(&comm_, size_, id, rank_));
}

NcclComm::~NcclComm() { release(); }

NcclComm::NcclComm(NcclComm&& other) noexcept
    : comm_(std::exchange(other.comm_, nullptr)),
      rank_(other.rank_),
      size_(other.size_),
      device_(other.device_) {}

NcclComm& NcclComm::operator=(NcclComm&& other) noexcept {
  if (this != &other) {
    release();
    comm_ = std::exchange(other.comm_, nullptr);
    rank_ = other.rank_;
    size_ = other.size_;
    device_ = other.device_;
  }
  return *this;
}

void NcclComm::release() {
  if (!comm_) return;
  // Never fail in a destructor: report and go on.
  const ncclResult_t rc = ncclCommDestroy(comm_);
  if (rc != ncclSuccess) LOG_WARN("ncclCommDestroy: %s", ncclGetErrorString(rc));
  comm_ = nullptr;
}

void wait_device(const std::function<cudaError_t()>& query, ncclComm_t comm, double timeout_s,
                 const std::function<std::string()>& what,
                 const std::function<void(double)>& timed_out) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  int idle = 0;
  for (;;) {
    const cudaError_t state = query();
    if (state == cudaSuccess) return;
    if (state != cudaErrorNotReady)
      fail(__FILE__, __LINE__, "CUDA", what() + ": " + cudaGetErrorString(state));
    ncclResult_t async = ncclSuccess;
    NCCL_CHECK(ncclCommGetAsyncError(comm, &async));
    if (async != ncclSuccess) {
      const char* last = ncclGetLastError(comm);
      fail(
          __FILE__, __LINE__, "NCCL",
          what() + ": " + ncclGetErrorString(async) + (last ? std::string(" (") + last + ")" : ""));
    }
    const double waited = std::chrono::duration<double>(clock::now() - start).count();
    if (waited > timeout_s) timed_out(waited);
    // Spin briefly, then sleep up to 1 ms: ranks may share few cores.
    if (++idle > 100)
      std::this_thread::sleep_for(std::chrono::microseconds(std::min(1000, 10 * (idle - 100))));
  }
}

void wait_stream(cudaStream_t stream, ncclComm_t comm, double timeout_s, const char* what) {
  wait_device([&] { return cudaStreamQuery(stream); }, comm, timeout_s,
              [&] { return std::string(what); },
              [&](double) {
                fail(__FILE__, __LINE__, "NCCL",
                     std::string(what) + ": not done after " + std::to_string(timeout_s) +
                         " s (a peer missing from the collective?)");
              });
}

void check_current_device(ncclComm_t comm, const std::string& who) {
  int device = -1, nccl_device = -1;
  NCCL_CHECK(ncclCommCuDevice(comm, &nccl_device));
  CUDA_CHECK(cudaGetDevice(&device));
  ML_CHECK(device == nccl_device, who + ": the NCCL communicator is on device " +
                                      std::to_string(nccl_device) + ", the current device is " +
                                      std::to_string(device));
}

}  // namespace meshloom::cuda
