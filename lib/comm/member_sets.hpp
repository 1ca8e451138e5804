// Member sets of trainer groups: the pure bookkeeping behind the group
// communicators (MPI: comm/group_comms.hpp; NCCL: kernels/host/comm/group_comms.hpp),
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
#include <cstdint>
#include <list>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace meshloom::comm {

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

// What one prepare() of a group communicator cache did: sets found in the
// cache, sets split (and the split calls they took), sets evicted, the
// seconds spent splitting, and the bytes the cache holds after it (NCCL's
// device memory; 0 where not measured).
struct GroupCommStats {
  int64_t hits = 0, misses = 0, splits = 0, evictions = 0;
  double split_seconds = 0;
  int64_t held_bytes = 0;
  // Sums counts and seconds; keeps the later held bytes.
  GroupCommStats& operator+=(const GroupCommStats& o);
};

// Least-recently-used order over member sets, bounded by a count and,
// optionally, by bytes. It holds only keys and their costs; the caller owns
// what they stand for.
//
// A set's cost (an NCCL communicator's device memory) is known only once it
// exists, so a new set enters at a prediction (the largest cost settled so
// far for a set of its size, else 0), prepare() evicts for the prediction
// before the caller creates anything, and once the caller has measured the
// new sets (and agreed on one number per set with the other trainers) it
// settles them and trims what they took beyond the budget. Every input is
// the same on every trainer, so every trainer evicts the same sets.
class MemberSetLru {
 public:
  // byte_budget 0: bounded by count alone.
  explicit MemberSetLru(size_t capacity, int64_t byte_budget = 0);

  struct Plan {
    std::vector<MemberSet> create;  // this step's sets not held yet, in step order
    std::vector<MemberSet> evict;   // least recent first; never one of this step's sets
  };
  // Marks this step's sets as most recently used, adds the new ones, and
  // drops the least recent others while over the capacity or the budget. A
  // step whose sets alone exceed them keeps them all until a later step
  // lets them go: evicting a set the step still needs would mean splitting
  // it twice.
  Plan prepare(const std::vector<MemberSet>& step_sets);
  // The measured cost of a set held (replaces its prediction).
  void settle(const MemberSet& set, int64_t bytes);
  // The sets to evict, least recent first and never the last step's, while
  // the held cost exceeds the budget.
  std::vector<MemberSet> trim();

  bool contains(const MemberSet& set) const { return where_.count(set) != 0; }
  size_t size() const { return order_.size(); }
  size_t capacity() const { return capacity_; }
  int64_t byte_budget() const { return byte_budget_; }
  int64_t bytes() const { return bytes_; }  // the held sets' costs (settled or predicted)
  int64_t bytes_of(const MemberSet& set) const;
  // Every set held, least recent first.
  std::vector<MemberSet> sets() const;

 private:
  struct Entry {
    std::list<MemberSet>::iterator at;
    int64_t bytes = 0;
  };
  bool over(size_t keep) const;
  void drop_back(std::vector<MemberSet>& evicted);

  size_t capacity_;
  int64_t byte_budget_;
  std::list<MemberSet> order_;  // front: most recently used
  std::map<MemberSet, Entry> where_;
  std::map<size_t, int64_t> cost_by_size_;  // the largest settled cost per member count
  size_t step_sets_ = 0;                    // the last step's sets: the front of order_
  int64_t bytes_ = 0;
};

}  // namespace meshloom::comm
