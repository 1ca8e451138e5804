// A test-only NCCL over MPI, preloaded (LD_PRELOAD) into meshloom or a GPU
// test so that several ranks can share one GPU on the NCCL code paths:
// NCCL itself refuses two ranks on one device, and a lent machine has one.
// Each call drains its stream, stages device buffers through host memory,
// runs the MPI equivalent (shim_core.hpp) and copies the result back on the
// stream, so the caller's stream order holds. Numerically it is what NCCL
// computes up to the summation order; it is not fast.
//
// meshloom makes communicators through meshloom_nccl_shim_init (found with
// dlsym by kernels/host/comm/nccl_comm.cpp), which duplicates the MPI communicator
// the real NCCL's unique id would have been broadcast over.
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <cstdio>
#include <string>
#include <vector>

#include "shim_core.hpp"

struct ncclComm {
  MPI_Comm mpi = MPI_COMM_NULL;
  int rank = 0, size = 1, device = 0;
};

namespace {

namespace shim = meshloom::nccl_shim;

std::string g_last_error;

ncclResult_t fail(ncclResult_t rc, const std::string& why) {
  g_last_error = "nccl shim: " + why;
  std::fprintf(stderr, "%s\n", g_last_error.c_str());
  return rc;
}

bool cuda_ok(cudaError_t rc, const char* what) {
  if (rc == cudaSuccess) return true;
  fail(ncclUnhandledCudaError, std::string(what) + ": " + cudaGetErrorString(rc));
  return false;
}

bool elem_of(ncclDataType_t t, shim::Elem* e) {
  switch (t) {
    case ncclUint8:
      *e = shim::Elem::u8;
      return true;
    case ncclInt64:
      *e = shim::Elem::i64;
      return true;
    case ncclFloat32:
      *e = shim::Elem::f32;
      return true;
    case ncclFloat64:
      *e = shim::Elem::f64;
      return true;
    case ncclBfloat16:
      *e = shim::Elem::bf16;
      return true;
    default:
      return false;
  }
}

// Host copies of device buffers, made and written back on the caller's stream.
bool to_host(std::vector<char>* host, const void* data, size_t bytes, cudaStream_t stream) {
  host->resize(bytes);
  return bytes == 0 ||
         (cuda_ok(cudaMemcpyAsync(host->data(), data, bytes, cudaMemcpyDefault, stream),
                  "cudaMemcpyAsync to host") &&
          cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize"));
}

bool to_device(void* data, const std::vector<char>& host, cudaStream_t stream) {
  return host.empty() ||
         (cuda_ok(cudaMemcpyAsync(data, host.data(), host.size(), cudaMemcpyDefault, stream),
                  "cudaMemcpyAsync to device") &&
          cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize"));
}

// The open group's transfers, with the streams and buffers they came with.
struct Pending {
  shim::Transfer transfer;
  void* device = nullptr;
  cudaStream_t stream = nullptr;
  ncclComm_t comm = nullptr;
  std::vector<char> host;
};
thread_local int g_group_depth = 0;
thread_local std::vector<Pending> g_pending;

ncclResult_t run_pending() {
  std::vector<Pending> pending;
  pending.swap(g_pending);
  for (Pending& p : pending) {
    if (p.transfer.send && !to_host(&p.host, p.device, p.transfer.bytes, p.stream))
      return ncclUnhandledCudaError;
    if (!p.transfer.send) p.host.resize(p.transfer.bytes);
    p.transfer.data = p.host.data();
  }
  // One MPI batch per communicator, in the order the transfers were issued.
  for (size_t i = 0; i < pending.size(); ++i) {
    if (pending[i].comm == nullptr) continue;
    const ncclComm_t comm = pending[i].comm;
    std::vector<shim::Transfer> batch;
    for (Pending& p : pending)
      if (p.comm == comm) {
        batch.push_back(p.transfer);
        p.comm = nullptr;
      }
    try {
      shim::run_transfers(batch, comm->mpi);
    } catch (const std::exception& e) {
      return fail(ncclSystemError, e.what());
    }
  }
  for (Pending& p : pending)
    if (!p.transfer.send && !to_device(p.device, p.host, p.stream)) return ncclUnhandledCudaError;
  return ncclSuccess;
}

ncclResult_t queue(bool send, void* data, size_t count, ncclDataType_t type, int peer,
                   ncclComm_t comm, cudaStream_t stream) {
  shim::Elem e;
  if (!elem_of(type, &e)) return fail(ncclInvalidArgument, "unsupported data type");
  Pending p;
  p.transfer = {send, nullptr, count * shim::elem_bytes(e), peer};
  p.device = data;
  p.stream = stream;
  p.comm = comm;
  g_pending.push_back(std::move(p));
  return g_group_depth > 0 ? ncclSuccess : run_pending();
}

}  // namespace

extern "C" {

// Wraps a duplicate of `comm` (collective over it) as a NCCL communicator on
// the current device.
ncclResult_t meshloom_nccl_shim_init(ncclComm_t* out, MPI_Comm comm) {
  auto* c = new ncclComm;
  if (MPI_Comm_dup(comm, &c->mpi) != MPI_SUCCESS) return fail(ncclSystemError, "MPI_Comm_dup");
  MPI_Comm_rank(c->mpi, &c->rank);
  MPI_Comm_size(c->mpi, &c->size);
  if (!cuda_ok(cudaGetDevice(&c->device), "cudaGetDevice")) return ncclUnhandledCudaError;
  *out = c;
  return ncclSuccess;
}

ncclResult_t ncclGetVersion(int* version) {
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  *id = ncclUniqueId{};
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t*, int, ncclUniqueId, int) {
  return fail(ncclInvalidUsage,
              "communicators are made by meshloom_nccl_shim_init from an MPI communicator");
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* out, ncclConfig_t*) {
  MPI_Comm split = MPI_COMM_NULL;
  if (MPI_Comm_split(comm->mpi, color == NCCL_SPLIT_NOCOLOR ? MPI_UNDEFINED : color, key, &split) !=
      MPI_SUCCESS)
    return fail(ncclSystemError, "MPI_Comm_split");
  if (split == MPI_COMM_NULL) {
    *out = nullptr;
    return ncclSuccess;
  }
  auto* c = new ncclComm;
  c->mpi = split;
  c->device = comm->device;
  MPI_Comm_rank(split, &c->rank);
  MPI_Comm_size(split, &c->size);
  *out = c;
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  MPI_Comm_free(&comm->mpi);
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  *count = comm->size;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  *rank = comm->rank;
  return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  *device = comm->device;
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t, ncclResult_t* error) {
  *error = ncclSuccess;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t rc) {
  return rc == ncclSuccess ? "no error (nccl shim)" : "error (nccl shim: see stderr)";
}

const char* ncclGetLastError(ncclComm_t) { return g_last_error.c_str(); }

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t type,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  shim::Elem e;
  if (!elem_of(type, &e)) return fail(ncclInvalidArgument, "unsupported data type");
  if (op != ncclSum && op != ncclMax) return fail(ncclInvalidArgument, "unsupported reduction");
  std::vector<char> host;
  if (!to_host(&host, send, count * shim::elem_bytes(e), stream)) return ncclUnhandledCudaError;
  try {
    shim::all_reduce(host.data(), host.data(), count, e,
                     op == ncclSum ? shim::ReduceOp::sum : shim::ReduceOp::max, comm->mpi);
  } catch (const std::exception& x) {
    return fail(ncclSystemError, x.what());
  }
  return to_device(recv, host, stream) ? ncclSuccess : ncclUnhandledCudaError;
}

ncclResult_t ncclAllGather(const void* send, void* recv, size_t count, ncclDataType_t type,
                           ncclComm_t comm, cudaStream_t stream) {
  shim::Elem e;
  if (!elem_of(type, &e)) return fail(ncclInvalidArgument, "unsupported data type");
  std::vector<char> mine, all(count * shim::elem_bytes(e) * size_t(comm->size));
  if (!to_host(&mine, send, count * shim::elem_bytes(e), stream)) return ncclUnhandledCudaError;
  try {
    shim::all_gather(mine.data(), all.data(), count, e, comm->mpi);
  } catch (const std::exception& x) {
    return fail(ncclSystemError, x.what());
  }
  return to_device(recv, all, stream) ? ncclSuccess : ncclUnhandledCudaError;
}

ncclResult_t ncclSend(const void* send, size_t count, ncclDataType_t type, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return queue(true, const_cast<void*>(send), count, type, peer, comm, stream);
}

ncclResult_t ncclRecv(void* recv, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return queue(false, recv, count, type, peer, comm, stream);
}

ncclResult_t ncclGroupStart() {
  ++g_group_depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (g_group_depth == 0) return fail(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  return --g_group_depth > 0 ? ncclSuccess : run_pending();
}

}  // extern "C"
