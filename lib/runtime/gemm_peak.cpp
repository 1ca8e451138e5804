#include "runtime/gemm_peak.hpp"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "comm/mpi_check.hpp"
#include "comm/p2p.hpp"
#include "model/blas.hpp"
#include "parallel/nodes.hpp"
#include "train/trainer.hpp"

namespace meshloom::runtime {

double measure_sgemm_peak(int threads, int n) {
  std::vector<float> a(size_t(n) * n, 0.5f), b(size_t(n) * n, 0.25f), c(size_t(n) * n, 0.0f);
  // The best of many short products over about a second: a brief hiccup
  // (another process on the node) only ever makes a product slower.
  double best = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int rep = 0; rep < 1000; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    if (rep >= 6 && std::chrono::duration<double>(t0 - start).count() > 1.0) break;
    model::gemm_parallel<float>(threads, model::Op::N, model::Op::N, n, n, n, 1.0f, a.data(), n,
                                b.data(), n, 0.0f, c.data(), n);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rep > 0) best = std::max(best, 2.0 * n * double(n) * n / s);  // first run warms up
  }
  return best;
}

namespace {

// The world ranks of the trainers on this rank's node.
std::vector<int> trainers_on_node(const parallel::World& w) {
  std::vector<int> ranks;
  for (int r = w.layout.first_rank(parallel::Role::trainer); r < w.size; ++r)
    if (w.hosts[size_t(r)] == w.hosts[size_t(w.rank)]) ranks.push_back(r);
  return ranks;
}

// A barrier that waits asleep (wait_requests backs off): ranks spinning in
// MPI_Barrier would take the cores being measured.
void sleeping_barrier(MPI_Comm comm, double timeout_s, const char* when) {
  MPI_Request request;
  MPI_CHECK(MPI_Ibarrier(comm, &request));
  comm::wait_requests(&request, 1, timeout_s,
                      [when] { return std::string("the node's ranks ") + when; });
}

}  // namespace

double node_sgemm_peak(const parallel::World& w) {
  if (w.config.run.backend == config::Backend::cuda) return 0;
  const std::vector<int> trainers = trainers_on_node(w);
  const bool measures = !trainers.empty() && trainers.front() == w.rank;
  if (w.config.run.peak_gflops > 0) return measures ? w.config.run.peak_gflops * 1e9 : 0;
  MPI_Comm node;
  MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, parallel::index_nodes(w.hosts).node[size_t(w.rank)],
                           w.rank, &node));
  sleeping_barrier(node, w.config.run.timeout, "before the sgemm peak measurement");
  double peak = 0;
  if (measures) {
    const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
    peak =
        measure_sgemm_peak(std::min(cores, int(trainers.size()) * train::threads_per_trainer(w)));
  }
  sleeping_barrier(node, w.config.run.timeout, "after the sgemm peak measurement");
  MPI_CHECK(MPI_Comm_free(&node));
  return peak;
}

}  // namespace meshloom::runtime
