// MPI communicators for the CP groups of a step, split from a parent (the
// trainers' data axis) and cached by member set, so that a group that recurs
// across steps is split once: the CPU counterpart of the NCCL cache
// (kernels/host/comm/group_comms.hpp), with the same protocol (comm/member_sets.hpp).
//
// MPI_Comm_split is collective over the parent, so prepare() takes the whole
// step's list of groups, which every rank of the parent holds, and every
// rank computes from it and its cache (the same everywhere: non-members
// remember a set too, with MPI_COMM_NULL) the same evictions and the same
// splits in the same order. Disjoint new sets share one split (one colour
// each). Evicting frees the communicator (MPI_Comm_free, local). The cache
// is bounded: least recently used sets go once it holds more than its
// capacity (a step needing more keeps them all until a later step).
//
//   MpiGroupComms groups(data_axis);
//   groups.prepare(step_groups);            // every rank, the same list
//   MPI_Comm g = groups.get(my_group);      // ranks: the sorted member order
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "comm/member_sets.hpp"

namespace meshloom::comm {

class MpiGroupComms {
 public:
  static constexpr size_t kDefaultCapacity = 64;

  // `parent` must outlive this object; its ranks are the groups' members.
  explicit MpiGroupComms(MPI_Comm parent, size_t capacity = kDefaultCapacity);
  ~MpiGroupComms();
  MpiGroupComms(const MpiGroupComms&) = delete;
  MpiGroupComms& operator=(const MpiGroupComms&) = delete;

  // Collective over the parent: every rank calls it with the same groups
  // (ranks of the parent; any order within a group) in the same order.
  // Returns what it did.
  GroupCommStats prepare(const std::vector<std::vector<int>>& step_groups);

  // The communicator of a prepared group that holds this rank; its ranks
  // follow the sorted member set.
  MPI_Comm get(std::span<const int> members) const;
  bool contains(std::span<const int> members) const;

  size_t size() const { return lru_.size(); }
  size_t capacity() const { return lru_.capacity(); }
  // Every set split so far, in order (what a test compares across ranks).
  const std::vector<MemberSet>& split_log() const { return split_log_; }

 private:
  MPI_Comm parent_;
  int rank_ = 0, size_ = 1;
  MemberSetLru lru_;
  std::map<MemberSet, MPI_Comm> comms_;  // MPI_COMM_NULL where this rank is not a member
  std::vector<MemberSet> split_log_;
};

}  // namespace meshloom::comm
