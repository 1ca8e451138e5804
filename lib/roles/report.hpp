// The report every rank sends rank 0 at the end of the job (wire::Report):
// its role's work, busy time and memory.
#pragma once

#include <cstdint>

#include "wire/protocol.hpp"

namespace meshloom::roles {

// Fills the memory fields of `report` (a colocated trainer's PSS includes its
// data worker processes, `worker_pss_kib`) and sends it to rank 0.
void send_final_report(wire::Report report, int64_t worker_pss_kib = 0);

// The memory fields alone (rank 0 keeps its own report).
void fill_memory(wire::Report* report, int64_t worker_pss_kib = 0);

}  // namespace meshloom::roles
