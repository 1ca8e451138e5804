// Helpers shared by the planner tests: a cost model with round numbers, and
// random batches of every shape the planners must handle.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "plan/cost/cost_model.hpp"
#include "plan/io/lengths.hpp"
#include "plan/model_shape.hpp"

namespace meshloom::plan::plantest {

// LLaMA-7B on an H100-class trainer: the cost model the simulator uses.
inline CostModel llama7b_cost() {
  Hardware hw;
  hw.flops = 989e12 * 0.45;
  hw.bandwidth = 25e9;
  return CostModel::from_shape(model_shape("llama-7b"), hw);
}

struct Batch {
  int kind = 0;  // 0 heavy tail, 1 short + few long, 2 nothing to split, 3 boundaries
  int32_t trainers = 1;
  int64_t capacity = 1;
  std::vector<int64_t> lengths;
};

// A random step: T log-uniform in [1, max_trainers], C in [64, 16K], lengths
// from 1 token to many times C (never more than T x C, which could not be
// planned), about `fill` x T x C tokens in all, at most max_seqs sequences.
inline Batch random_batch(Rng& rng, int32_t max_trainers, double fill, int max_seqs) {
  Batch b;
  b.trainers = std::clamp<int32_t>(
      int32_t(std::exp(rng.uniform() * std::log(double(max_trainers) + 0.99))), 1, max_trainers);
  b.capacity = int64_t(64 * std::pow(256.0, rng.uniform()));
  const int64_t C = b.capacity;
  const int64_t cap = int64_t(b.trainers) * C;
  const int kind = int(rng.below(4));
  b.kind = kind;
  const double budget = fill * double(cap);
  double tokens = 0;
  while (tokens < budget && int(b.lengths.size()) < max_seqs) {
    int64_t L = 1;
    const double u = rng.uniform();
    switch (kind) {
      case 0:  // heavy tail: log-uniform over [1, 16 C]
        L = int64_t(std::exp(u * std::log(16.0 * double(C))));
        break;
      case 1:  // mostly short, a few very long
        L = u < 0.9 ? 1 + int64_t(rng.below(uint64_t(C)))
                    : int64_t(double(C) * (1 + rng.uniform() * std::min(64, b.trainers)));
        break;
      case 2:  // nothing to split
        L = 1 + int64_t(rng.below(uint64_t(C)));
        break;
      default: {  // boundaries and tiny sequences
        const int64_t picks[] = {1, 2, 3, C - 1, C, C + 1, 2 * C, 2 * C + 1, 3 * C - 1};
        L = picks[rng.below(9)];
        break;
      }
    }
    L = std::clamp<int64_t>(L, 1, cap);
    b.lengths.push_back(L);
    tokens += double(L);
  }
  if (b.lengths.empty()) b.lengths.push_back(1);
  return b;
}

}  // namespace meshloom::plan::plantest
