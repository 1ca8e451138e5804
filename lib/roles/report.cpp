#include "roles/report.hpp"

#include <mpi.h>

#include "base/check.hpp"
#include "base/memory.hpp"
#include "comm/p2p.hpp"

namespace meshloom::roles {

void fill_memory(wire::Report* report, int64_t worker_pss_kib) {
  report->rank = process_rank();
  report->peak_rss_kib = peak_rss_kib();
  report->worker_pss_kib = worker_pss_kib;
  report->pss_kib = pss_kib() + worker_pss_kib;
}

void send_final_report(wire::Report report, int64_t worker_pss_kib) {
  fill_memory(&report, worker_pss_kib);
  comm::send_bytes(wire::encode(report), 0, wire::kReport, MPI_COMM_WORLD);
}

}  // namespace meshloom::roles
