// What device_ring_test and device_ulysses_test share: the packed documents
// every rank builds alike, their full attention on the CPU (double), and
// this rank's contiguous piece of them, to be compared row for row with what
// a context-parallel attention gives the rank.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "tests/kernels/attention_test_util.hpp"
#include "tests/kernels/nccl_test.hpp"

namespace meshloom::cuda::test {

constexpr int kLayers = 2;  // layers run on one attention object, as in the model
constexpr FlashDims kDims{8, 2, 64};
constexpr int64_t kQw = int64_t{kDims.n_heads} * kDims.head_dim;     // query row width
constexpr int64_t kKw = int64_t{kDims.n_kv_heads} * kDims.head_dim;  // key/value row width

inline std::vector<double> rows_of(const std::vector<double>& all, int64_t width, int64_t lo,
                                   int64_t hi) {
  return std::vector<double>(all.begin() + lo * width, all.begin() + hi * width);
}

// Rank r holds a share proportional to r + 1, or nothing when `first_empty`
// and r == 0 (the others then split it the same way). `seed`: the values.
struct Problem {
  Problem(bool use_bf16, bool first_empty, uint32_t seed) {
    const int rank = world_rank(), size = world_size();
    all = make_packed(kDims, {300, 45, 129, 1, 77}, seed, use_bf16);
    const int64_t n = all.n();
    const int skip = first_empty ? 1 : 0;
    // Where rank r's piece begins (r = size: the end).
    auto begin = [&](int r) -> int64_t {
      if (size == skip) return 0;  // a group of one that holds nothing
      const int64_t j = std::max(0, r - skip), m = size - skip;
      return n * j * (j + 1) / (m * (m + 1));
    };
    lo = begin(rank);
    hi = begin(rank + 1);
    std::vector<int64_t> rows(static_cast<size_t>(hi - lo));
    std::iota(rows.begin(), rows.end(), lo);
    mine = take_rows(kDims, all, rows);

    cpu_forward(kDims, all, all, out, lse);
    const std::vector<double> delta = cpu_delta(kDims, all, out);
    dq.assign(static_cast<size_t>(n * kQw), 0.0);
    dk.assign(static_cast<size_t>(n * kKw), 0.0);
    dv.assign(static_cast<size_t>(n * kKw), 0.0);
    cpu_backward(kDims, all, all, lse, delta, dq, dk, dv);
  }
  Block all, mine;
  int64_t lo = 0, hi = 0;
  std::vector<double> out, lse, dq, dk, dv;  // every row
};

}  // namespace meshloom::cuda::test
