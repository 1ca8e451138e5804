// The few lines `meshloom plan` prints about a plan (pure formatting).
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "plan/plan.hpp"

namespace meshloom::plan {

// Planner, sequences, tokens, trainers and capacity; the predicted step,
// imbalance, step / ideal (`ideal`: the least step time, 0: unknown) and idle
// share; split sequences, ring traffic, micro-batches per trainer; the CP
// algorithms of split sequences ("ring 3, ulysses 5, hybrid(4x2) 1"); planning
// time and the binary plan's size. Lines end in newlines.
std::string plan_summary(const Plan& p, double ideal);

// One line per ring (split sequence), by start, at most `max_rows` of them:
// sequence, tokens, k, CP algorithm, trainers, the nodes it spans and the
// node boundaries it crosses (nodes - 1; "?" where `cost` knows no nodes),
// start and member time; then a line counting the rings inside one node and
// those that cross. "" when no sequence is split.
std::string ring_table(const Plan& p, const CostModel& cost, size_t max_rows);
// The rings (split sequences) of a plan by the nodes they span.
struct RingNodes {
  int64_t rings = 0, inside = 0, crossing = 0, boundaries = 0;
  bool known = false;  // false: `cost` knows no nodes, only `rings` counts
};
RingNodes ring_nodes(const Plan& p, const CostModel& cost);
// "5 rings: 4 inside one node, 1 across nodes; node boundaries crossed: 1".
std::string format_ring_nodes(const RingNodes& r);
constexpr size_t kRingTableRows = 24;  // what `meshloom plan` lists; a count covers the rest

}  // namespace meshloom::plan
