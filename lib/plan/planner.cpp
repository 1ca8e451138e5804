#include "plan/planner.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "base/check.hpp"
#include "base/math.hpp"
#include "base/strings.hpp"
#include "plan/cp_algorithm.hpp"
#include "plan/io/lengths.hpp"
#include "plan/pipeline/pp_plan.hpp"
#include "plan/planners/bytescale_planner.hpp"
#include "plan/planners/hdp_planner.hpp"
#include "plan/planners/naive_planner.hpp"
#include "plan/planners/static_planner.hpp"

namespace meshloom::plan {

std::vector<config::Planner> all_planners() {
  return {config::Planner::hdp, config::Planner::bytescale, config::Planner::naive,
          config::Planner::static_grid};
}

float offload_ratio_for(int64_t length, int32_t k, int64_t capacity, const CostModel& cost) {
  const int64_t m = (length + k - 1) / k;
  if (m <= capacity) return 0.f;
  const int l = cost.layers;
  if (l <= 2) return 2.f;  // offloading cannot help: reported as infeasible (> 1)
  const double r = 1.0 - (double(l) * double(capacity) / double(m) - 2.0) / double(l - 2);
  if (r > 1.0) return 2.f;
  // A hair above the exact ratio, so that the float rounds to a fitting one.
  return float(std::min(1.0, r + 1e-6));
}

Split min_split(int64_t length, const PlannerOptions& o, const CostModel& cost) {
  Split s;
  const int64_t plain = ceil_div(length, o.capacity);
  s.k = int32_t(std::min<int64_t>(plain, INT32_MAX));
  if (!o.offload || length <= o.capacity || cost.layers <= 2) return s;
  const int l = cost.layers;
  const int64_t lo =
      std::max<int64_t>(1, (2 * length + int64_t(l) * o.capacity - 1) / (int64_t(l) * o.capacity));
  for (int64_t d = lo; d < plain; ++d) {
    const float r = offload_ratio_for(length, int32_t(d), o.capacity, cost);
    if (r > 1.f) continue;
    const int64_t m = (length + d - 1) / d;
    const double copy = double(r) * double(m) * cost.act_bytes * cost.layers;
    const double hide = cost.piece_compute(length, int32_t(d)) * cost.host_bandwidth;
    if (copy <= hide && copy <= cost.host_memory) {
      s.k = int32_t(d);
      s.ratio = r;
      return s;
    }
  }
  return s;
}

void check_plan_inputs(const std::vector<int64_t>& lengths, const PlannerOptions& o) {
  if (o.trainers < 1) throw Error(strf("trainers = %d, need at least 1", o.trainers));
  if (o.capacity < 1) throw Error(strf("capacity = %lld, need at least 1", (long long)o.capacity));
  if (!(o.slack >= 0 && o.slack < 1)) throw Error(strf("slack = %g, need 0 <= slack < 1", o.slack));
  for (size_t i = 0; i < lengths.size(); ++i)
    if (lengths[i] < 1)
      throw Error(
          strf("sequence %zu has length %lld; lengths must be positive", i, (long long)lengths[i]));
}

Plan plan_step(const StepPlanner& how, const std::vector<int64_t>& lengths, const PlannerOptions& o,
               const CostModel& cost) {
  switch (how.balance) {
    case config::Balance::dp:
      break;
    case config::Balance::pp:
      ML_CHECK(how.pipeline != nullptr, "balance pp needs the pipeline's stages");
      return pp_step_plan(lengths, o, cost, *how.pipeline);
  }
  check_plan_inputs(lengths, o);
  const auto t0 = std::chrono::steady_clock::now();
  Plan p;
  switch (how.planner) {
    case config::Planner::hdp:
      p = plan_hdp(lengths, o, cost);
      break;
    case config::Planner::bytescale:
      p = plan_bytescale(lengths, o, cost);
      break;
    case config::Planner::naive:
      p = plan_naive(lengths, o, cost);
      break;
    case config::Planner::static_grid:
      p = plan_static(lengths, o, cost);
      break;
  }
  choose_cp_algorithms(p, cost, o.cp_algorithm);
  p.planning_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return p;
}

IdealBound ideal_bound(const std::vector<int64_t>& lengths, const PlannerOptions& o,
                       const CostModel& cost) {
  IdealBound b;
  double total = 0;
  int64_t longest = 0;
  for (int64_t L : lengths) {
    total += cost.whole(L);
    if (L <= o.capacity) b.largest_whole = std::max(b.largest_whole, cost.whole(L));
    longest = std::max(longest, L);
  }
  b.balanced = total / std::max(1, o.trainers);
  if (longest > o.capacity) {
    const int64_t kmax = std::min<int64_t>(o.trainers, longest);
    auto ring = [&](int64_t k) {
      const double m = double((longest + k - 1) / k);
      return least_cp_seconds(cost, m, double(longest) * double(longest) / double(k), int(k),
                              o.cp_algorithm);
    };
    // Coarse geometric scan, then every width around the best point.
    int64_t best_k = 1;
    double best = ring(1);
    for (double x = 1; x < double(kmax);) {
      x = std::max(x * 1.05, x + 1);
      const int64_t k = std::min<int64_t>(kmax, int64_t(x));
      if (ring(k) < best) {
        best = ring(k);
        best_k = k;
      }
    }
    const int64_t lo = std::max<int64_t>(1, int64_t(best_k / 1.06) - 1);
    const int64_t hi = std::min<int64_t>(kmax, int64_t(best_k * 1.06) + 1);
    for (int64_t k = lo; k <= hi; ++k) best = std::min(best, ring(k));
    b.fastest_ring = best;
  }
  return b;
}

PlannerOptions options_from_config(const config::PlanConfig& plan, int32_t trainers,
                                   int64_t seq_len_max) {
  PlannerOptions o;
  o.trainers = trainers;
  o.capacity = plan.capacity;
  o.slack = plan.slack;
  o.offload = plan.offload;
  o.seq_len_max = seq_len_max;
  o.static_fallback = plan.static_fallback;
  o.cp_algorithm = plan.cp_algorithm;
  return o;
}

}  // namespace meshloom::plan
