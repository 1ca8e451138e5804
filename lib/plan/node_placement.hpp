// Where the HDP planner puts a ring when it knows the run's nodes
// (CostModel::places_by_node): pure bookkeeping of which trainers are free
// when, by node, so that a ring that fits in a node can run inside one.
//
// Rules (hdp_planner.hpp, steps 3a and 3b):
//  - greedy gangs: a ring takes the k trainers free earliest (ties: lowest
//    rank) when those share a node; else the k free earliest of one node,
//    if that ring ends no later (its faster link may make up for a later
//    start). The node: the one whose k-th trainer is free first, then the
//    one left with the fewest trainers free by then (best fit keeps whole
//    nodes for wider rings), then the lowest index.
//  - shelves: the rings of a shelf all start together, when every trainer
//    is free, so any ranks do (not only the shelf's region [0, R): a region
//    of 10 over nodes of 8 would split a ring of 4 on ranks 6-9); widest
//    first, each ring that fits in the free ranks of one node goes to the
//    node with the fewest such ranks that holds it (best fit, then the
//    lowest index), on its lowest free ranks; the rest take the lowest free
//    ranks left. The shelf keeps its R trainers' worth of rings.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <utility>
#include <vector>

#include "plan/cost/cost_model.hpp"

namespace meshloom::plan {

// k trainers for a ring and the time the last of them is free.
struct RingPick {
  std::vector<int32_t> ranks;  // increasing
  double start = 0;
};

// The trainers [0, T) by the time each is free, overall and per node.
class FreeTrainers {
 public:
  // Every trainer free at 0; `cost` gives the node of each.
  FreeTrainers(const CostModel& cost, int32_t trainers);
  // The k free earliest (ties: lowest rank).
  RingPick earliest(int32_t k) const;
  // The k free earliest on one node, the node chosen as in the file comment;
  // none when no node holds k trainers.
  std::optional<RingPick> earliest_in_one_node(int32_t k) const;
  // `ranks` become busy until `until`.
  void occupy(std::span<const int32_t> ranks, double until);

 private:
  using TimeRank = std::pair<double, int32_t>;
  std::vector<int32_t> node_;
  std::vector<double> free_at_;
  std::set<TimeRank> all_;
  std::vector<std::set<TimeRank>> by_node_;
};

// The ranks of each of a shelf's rings (`ks`: their sizes, summing to at most
// `trainers`) among trainers [0, trainers), as in the file comment.
std::vector<std::vector<int32_t>> shelf_ranks_by_node(const CostModel& cost, int32_t trainers,
                                                      std::span<const int32_t> ks);

}  // namespace meshloom::plan
