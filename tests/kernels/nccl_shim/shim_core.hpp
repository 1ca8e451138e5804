// The collectives of the test-only NCCL over MPI (nccl_shim.cpp), on host
// buffers: what NCCL would compute, through the MPI communicator of the
// NCCL one. Kept free of CUDA so that a CPU test checks it under mpirun.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace meshloom::nccl_shim {

// The element types meshloom hands to NCCL.
enum class Elem { u8, i64, f32, f64, bf16 };
enum class ReduceOp { sum, max };

size_t elem_bytes(Elem e);

// recv = op over ranks of send (count elements each; send may be recv).
// bf16 is reduced in float and rounded once to nearest even, so every rank
// gets the same bits.
void all_reduce(const void* send, void* recv, size_t count, Elem e, ReduceOp op, MPI_Comm comm);

// recv = every rank's `count` elements, in rank order.
void all_gather(const void* send, void* recv, size_t count, Elem e, MPI_Comm comm);

// One point-to-point transfer of a group (ncclGroupStart ... ncclGroupEnd).
struct Transfer {
  bool send = false;
  void* data = nullptr;
  size_t bytes = 0;
  int peer = 0;
};

// Posts every transfer at once and waits for all, as a NCCL group runs them:
// two ranks that send to each other in one group do not deadlock.
void run_transfers(const std::vector<Transfer>& transfers, MPI_Comm comm);

// bf16 <-> float, rounding to nearest even as the GPU does.
float bf16_to_float(uint16_t v);
uint16_t float_to_bf16(float f);

}  // namespace meshloom::nccl_shim
