#include "shim_core.hpp"

#include <cstring>
#include <stdexcept>
#include <string>

namespace meshloom::nccl_shim {
namespace {

void check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw std::runtime_error(std::string("nccl shim: ") + what + " failed");
}

MPI_Datatype mpi_type(Elem e) {
  switch (e) {
    case Elem::u8:
      return MPI_UINT8_T;
    case Elem::i64:
      return MPI_INT64_T;
    case Elem::f32:
      return MPI_FLOAT;
    case Elem::f64:
      return MPI_DOUBLE;
    case Elem::bf16:
      return MPI_UINT16_T;
  }
  return MPI_BYTE;
}

MPI_Op mpi_op(ReduceOp op) { return op == ReduceOp::sum ? MPI_SUM : MPI_MAX; }

void all_reduce_bf16(const void* send, void* recv, size_t count, ReduceOp op, MPI_Comm comm) {
  std::vector<float> wide(count);
  const auto* in = static_cast<const uint16_t*>(send);
  for (size_t i = 0; i < count; ++i) wide[i] = bf16_to_float(in[i]);
  check(MPI_Allreduce(MPI_IN_PLACE, wide.data(), int(count), MPI_FLOAT, mpi_op(op), comm),
        "MPI_Allreduce (bf16 as float)");
  auto* out = static_cast<uint16_t*>(recv);
  for (size_t i = 0; i < count; ++i) out[i] = float_to_bf16(wide[i]);
}

}  // namespace

size_t elem_bytes(Elem e) {
  switch (e) {
    case Elem::u8:
      return 1;
    case Elem::bf16:
      return 2;
    case Elem::f32:
      return 4;
    case Elem::i64:
    case Elem::f64:
      return 8;
  }
  return 1;
}

float bf16_to_float(uint16_t v) {
  const uint32_t bits = uint32_t(v) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

uint16_t float_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0)
    return uint16_t((bits >> 16) | 0x0040u);  // NaN stays NaN
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return uint16_t((bits + rounding) >> 16);
}

void all_reduce(const void* send, void* recv, size_t count, Elem e, ReduceOp op, MPI_Comm comm) {
  if (e == Elem::bf16) return all_reduce_bf16(send, recv, count, op, comm);
  const void* from = send == recv ? MPI_IN_PLACE : send;
  check(MPI_Allreduce(from, recv, int(count), mpi_type(e), mpi_op(op), comm), "MPI_Allreduce");
}

void all_gather(const void* send, void* recv, size_t count, Elem e, MPI_Comm comm) {
  int rank = 0;
  check(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  const size_t bytes = count * elem_bytes(e);
  // NCCL allows send to be recv's own slot; MPI wants MPI_IN_PLACE then.
  const bool in_place = static_cast<const char*>(send) == static_cast<char*>(recv) + rank * bytes;
  check(MPI_Allgather(in_place ? MPI_IN_PLACE : send, int(bytes), MPI_BYTE, recv, int(bytes),
                      MPI_BYTE, comm),
        "MPI_Allgather");
}

void run_transfers(const std::vector<Transfer>& transfers, MPI_Comm comm) {
  constexpr int kTag = 0x5eed;
  std::vector<MPI_Request> requests(transfers.size(), MPI_REQUEST_NULL);
  // Receives first, so that no send waits on an unposted receive.
  for (size_t i = 0; i < transfers.size(); ++i) {
    const Transfer& t = transfers[i];
    if (!t.send)
      check(MPI_Irecv(t.data, int(t.bytes), MPI_BYTE, t.peer, kTag, comm, &requests[i]),
            "MPI_Irecv");
  }
  for (size_t i = 0; i < transfers.size(); ++i) {
    const Transfer& t = transfers[i];
    if (t.send)
      check(MPI_Isend(t.data, int(t.bytes), MPI_BYTE, t.peer, kTag, comm, &requests[i]),
            "MPI_Isend");
  }
  check(MPI_Waitall(int(requests.size()), requests.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
}

}  // namespace meshloom::nccl_shim
