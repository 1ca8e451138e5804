#include "runtime/gemm_peak.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

#include "model/blas.hpp"

namespace meshloom {

double measure_sgemm_peak(int threads, int n) {
  std::vector<float> a(size_t(n) * n, 0.5f), b(size_t(n) * n, 0.25f), c(size_t(n) * n, 0.0f);
  // The best of many short products over about a second: the other ranks of
  // the node (loaders tokenizing at start) only ever make a product slower.
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

}  // namespace meshloom
