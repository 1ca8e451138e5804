// The planner's preference for cached group communicators: a
// step's plan is relabeled, HDP rank for HDP rank, so that its CP groups
// fall on member sets the trainers' communicator cache already holds.
//
// Relabeling costs nothing: a rank takes over another's whole schedule (its
// micro-batches, its places in rings), and only ranks of one node trade
// places, so every ring keeps its nodes and links, and the plan its time and
// validity. `node_of_rank` empty: one node, any rank may trade.
//
// Greedy, widest groups first (they are the dearest to split), then plan
// order: a group keeps its own ranks when its member set is cached;
// otherwise it takes the most recently used cached set of its size that
// agrees with the ranks it already has, whose other ranks are free and whose
// nodes match, pairing the rest in sorted order (so a hybrid group's Ulysses
// subgroups, consecutive in sorted order, come along). Ranks left over keep
// their own number where it is free, else take the lowest free one of their
// node. Pure and deterministic: the lead replays the trainers' cache from
// the step groups it sends (comm/member_sets.hpp) and checkpoints it, so a
// resumed run relabels as the uninterrupted one.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "plan/plan.hpp"

namespace meshloom::plan {

// new_rank[r] for every HDP rank r of the plan, a permutation. `cached`:
// sorted member sets, most recently used first.
std::vector<int32_t> cache_relabeling(const Plan& plan,
                                      const std::vector<std::vector<int32_t>>& cached,
                                      std::span<const int32_t> node_of_rank);

// The plan with rank r renamed new_rank[r] everywhere (groups, whose
// trainer holds which micro-batches).
Plan relabel_ranks(const Plan& plan, std::span<const int32_t> new_rank);

}  // namespace meshloom::plan
