// What the HDP planners (hdp, bytescale, naive) share: one step's sequences
// with their CP degree, offload ratio and time, and best-fit packing into
// micro-batches. Internal to lib/plan's planners.
#pragma once

#include <cstdint>
#include <functional>
#include <queue>
#include <utility>
#include <vector>

#include "base/check.hpp"
#include "base/strings.hpp"
#include "plan/io/lengths.hpp"
#include "plan/planner.hpp"

namespace meshloom::plan {

// (time, trainer): a trainer by when it is free, the earliest on top.
using TimeRank = std::pair<double, int32_t>;
using MinHeap = std::priority_queue<TimeRank, std::vector<TimeRank>, std::greater<TimeRank>>;

// Shared view of one step's sequences for the HDP planners.
struct SequenceWork {
  const std::vector<int64_t>& lengths;
  const PlannerOptions& o;
  const CostModel& cost;
  std::vector<int32_t> k;
  std::vector<float> r;
  std::vector<double> t;  // member time (k > 1) or whole time with amortized g (k = 1)

  SequenceWork(const std::vector<int64_t>& L, const PlannerOptions& opt, const CostModel& c)
      : lengths(L), o(opt), cost(c), k(L.size()), r(L.size()), t(L.size()) {
    for (size_t i = 0; i < L.size(); ++i) {
      const Split s = min_split(L[i], o, cost);
      if (s.k > o.trainers)
        throw Error(strf(
            "sequence %zu of %lld tokens needs %d trainers of capacity %lld, but there are %d%s", i,
            (long long)L[i], s.k, (long long)o.capacity, o.trainers,
            o.offload ? "" : " (selective offloading would need fewer)"));
      set(i, s.k, s.ratio);
    }
  }
  int32_t n() const { return int32_t(lengths.size()); }
  // Member time; `intra`: the ring stays inside one node.
  double time_of(int64_t L, int32_t kk, float ratio, bool intra = false) const {
    const double act = cost.act_bytes * cost.layers;
    if (kk == 1) {
      const double off = ratio * double(L) * act;
      return cost.micro_batch(double(L), double(L) * double(L), 1, false, off) - cost.g +
             cost.g * double(L) / double(o.capacity);
    }
    const double m = double((L + kk - 1) / kk);
    return cost.micro_batch(m, double(L) * double(L) / kk, kk, intra, ratio * m * act);
  }
  void set(size_t i, int32_t kk, float ratio) {
    k[i] = kk;
    r[i] = ratio;
    t[i] = time_of(lengths[i], kk, ratio);
  }
  double work(size_t i) const { return k[i] == 1 ? t[i] : double(k[i]) * t[i]; }
  // Activation memory of a whole sequence, in tokens (for packing).
  double resident(size_t i) const {
    const double L = double(lengths[i]);
    if (r[i] <= 0 || cost.layers <= 2) return L;
    return L * (2.0 + (1.0 - r[i]) * (cost.layers - 2)) / cost.layers;
  }
};

// Best fit decreasing by resident tokens into micro-batches of capacity C.
std::vector<std::vector<int32_t>> pack_best_fit(std::vector<int32_t> items, const SequenceWork& w);

}  // namespace meshloom::plan
