// Member sets of trainer groups: the pure bookkeeping behind the group
// communicators (MPI: comm/group_comms.hpp; NCCL: cuda/comm/group_comms.hpp),
// free of CUDA and MPI so that it is unit-tested alone.
//
// A group is a list of trainer indices (ranks in the trainers' communicator)
// in ring order; its member set is the same indices sorted, and is the key of
// the communicator cache: rings [2,0,1] and [0,1,2] share one communicator.
//
// The one rule: a split (MPI_Comm_split, ncclCommSplit) is collective over the parent, so every
// trainer must make the same split calls in the same order, members or not. Every function here is
// a pure function of the step's plan, which every trainer holds, so every trainer computes the same
// splits and the same evictions.
#pragma once

#include <cstddef>
#include <list>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace meshloom {

using MemberSet = std::vector<int>;  // sorted, distinct, non-negative trainer indices

// The key of a group: its members sorted. Fails on a repeated or negative index.
MemberSet member_set(std::span<const int> members);
// "{0,2,5}", for messages.
std::string to_string(const MemberSet& set);

// The distinct member sets of a step's groups, in order of first appearance.
std::vector<MemberSet> distinct_member_sets(const std::vector<std::vector<int>>& groups);

// Packs sets into rounds of pairwise-disjoint sets (first fit, in order): one
// ncclCommSplit per round creates all of its sets, set i of a round taking
// colour i. Returns, per round, indices into `sets`.
std::vector<std::vector<size_t>> split_rounds(const std::vector<MemberSet>& sets);

// The colour this trainer passes in a round: the index of the round's set
// that holds it, or -1 (NCCL_SPLIT_NOCOLOR) when it is in none of them.
int split_colour(const std::vector<MemberSet>& sets, const std::vector<size_t>& round, int trainer);

// A ring's neighbours, as trainer indices: members[(me+1)%k] and members[(me-1)%k].
struct RingPeers {
  int next = 0;
  int prev = 0;
};
RingPeers ring_peers(std::span<const int> members, int me);

// Least-recently-used order over member sets, bounded by a capacity. It
// holds only keys; the caller owns what they stand for.
class MemberSetLru {
 public:
  explicit MemberSetLru(size_t capacity);

  struct Plan {
    std::vector<MemberSet> create;  // this step's sets not held yet, in step order
    std::vector<MemberSet> evict;   // least recent first; never one of this step's sets
  };
  // Marks this step's sets as most recently used, adds the new ones, and
  // drops the least recent others while over capacity. A step with more
  // distinct sets than the capacity keeps them all (over capacity) until a
  // later step lets them go: evicting a set the step still needs would
  // mean splitting it twice.
  Plan prepare(const std::vector<MemberSet>& step_sets);

  bool contains(const MemberSet& set) const { return where_.count(set) != 0; }
  size_t size() const { return order_.size(); }
  size_t capacity() const { return capacity_; }
  // Every set held, least recent first.
  std::vector<MemberSet> sets() const;

 private:
  size_t capacity_;
  std::list<MemberSet> order_;  // front: most recently used
  std::map<MemberSet, std::list<MemberSet>::iterator> where_;
};

}  // namespace meshloom
