// The CP algorithm of each split sequence: ring, Ulysses or the
// hybrid of both, chosen after a planner has formed the groups.
//
// The choice never changes a group, a micro-batch or an order; it only sets
// Plan::cp, the Ulysses degree u of each group (plan.hpp), and retimes the
// plan with it (cost_model.hpp gives each algorithm's time). Allowed degrees
// are the divisors of the group size k that divide the query heads of a TP
// rank. `plan.cp_algorithm` picks:
//   ring     u = 1 everywhere (ring attention; the default, as before)
//   ulysses  the largest allowed u: pure Ulysses when k divides the heads,
//            else Ulysses of that u and a ring across
//   hybrid   USP/LoongTrain's layout: the largest allowed u < k whose
//            subgroups of consecutive members each sit in one node (any
//            u < k where the cost model knows no nodes), a ring of k / u
//            across; ring where no such u > 1 exists
//   auto     per group, the allowed u whose slowest member is fastest (ties:
//            the smaller u, so ring first)
// auto is never predicted slower than ring: a micro-batch's duration is at
// most its ring duration, and every start and end of the schedule only grows
// with durations (Plan::retime). Worked example, LLaMA-7B at TP 1 (32 heads,
// 8 KV heads of 128): a group of 8 on one node may take u = 8 (Ulysses), a
// group of 24 over three nodes u = 8 with a ring of 3 (hybrid(8x3)).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "plan/cost/cost_model.hpp"
#include "plan/plan.hpp"

namespace meshloom::plan {

// The degrees a k-way group may use, increasing, 1 first.
std::vector<int> ulysses_degrees(int k, const HeadShape& heads);

// The degree a forced setting (ring, ulysses, hybrid) gives the group `ranks`.
int forced_ulysses_degree(config::CpAlgorithm setting, std::span<const int32_t> ranks,
                          const CostModel& cost);

// Sets plan.cp by `setting` (plan.heads from the cost model) and retimes the
// plan when a group leaves the ring. Throws Error on a plan that cannot be
// retimed (see Plan::retime).
void choose_cp_algorithms(Plan& plan, const CostModel& cost, config::CpAlgorithm setting);

// The least time one member of a k-way group holding `tokens` with
// `attn_l2` could take under `setting` (for ideal_bound): ring alone, or the
// best allowed degree assuming a group or subgroup of at most the largest
// node's HDP ranks sits in one node. Without g.
double least_cp_seconds(const CostModel& cost, double tokens, double attn_l2, int k,
                        config::CpAlgorithm setting);

// Split sequences per algorithm: ring, ulysses, then hybrids by (u, r).
struct CpCount {
  config::CpAlgorithm kind = config::CpAlgorithm::ring;
  int32_t u = 1, r = 1;  // hybrid only (0 otherwise)
  double sequences = 0;
};
std::vector<CpCount> cp_counts(const Plan& plan);
// Adds `weight` x `more` into `into`, keeping the order above.
void add_cp_counts(std::vector<CpCount>& into, const std::vector<CpCount>& more, double weight);
// "ring 3, ulysses 5, hybrid(4x2) 1" ("none" when empty).
std::string format_cp_counts(const std::vector<CpCount>& counts);

}  // namespace meshloom::plan
