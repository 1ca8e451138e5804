// NCCL communicators for the trainer groups of a step, split from the
// trainers' communicator and cached by member set, so that a group that
// recurs across steps is split once.
//
// ncclCommSplit is collective over the parent: every trainer must call it,
// members with a colour and the others with NCCL_SPLIT_NOCOLOR, in the same
// order, or the trainers hang. So there is no "get or split one group" call:
// prepare() takes the whole step's list of groups (every trainer holds the
// plan) and every trainer computes, from that list and its cache (which is
// the same on every trainer: non-members remember a set too, with no
// communicator), the same evictions and the same splits, in the same order.
// Disjoint new sets share one split call (one colour each).
//
// The cache is bounded (least recently used out); an evicted communicator is
// destroyed, which in current NCCL is collective over its members: they all
// evict it at the same point of the same sequence, so none waits alone.
// Splits block the host until every trainer joins: call prepare() at the
// start of a step, not while this host waits on work that needs the others.
//
//   GroupComms groups(trainers.get());
//   groups.prepare(step_groups);                 // every trainer, same list
//   ncclComm_t g = groups.get(my_group);         // ranks: sorted member order
#pragma once

#include <nccl.h>

#include <cstddef>
#include <map>
#include <span>
#include <vector>

#include "comm/member_sets.hpp"

namespace meshloom::kernels {

class GroupComms {
 public:
  static constexpr size_t kDefaultCapacity = 64;

  // `parent`: the trainers' communicator; it must outlive this object.
  explicit GroupComms(ncclComm_t parent, size_t capacity = kDefaultCapacity);
  // Destroys every communicator held, least recent first (the same order on
  // every trainer).
  ~GroupComms();
  GroupComms(const GroupComms&) = delete;
  GroupComms& operator=(const GroupComms&) = delete;

  // Collective over the parent: every trainer calls it with the same groups
  // (trainer indices; any order within a group) in the same order. Evicts
  // and destroys old sets beyond the capacity, then splits the new ones.
  void prepare(const std::vector<std::vector<int>>& step_groups);

  // The communicator of a prepared group that holds this trainer. Its ranks
  // follow the sorted member set (the ring order is the caller's business).
  ncclComm_t get(std::span<const int> members) const;
  bool contains(std::span<const int> members) const;

  int trainer() const { return trainer_; }
  size_t size() const { return lru_.size(); }
  size_t splits() const { return splits_; }  // ncclCommSplit calls so far

 private:
  ncclComm_t parent_;
  int trainer_ = 0;
  MemberSetLru lru_;
  std::map<MemberSet, ncclComm_t> comms_;  // null where this trainer is not a member
  size_t splits_ = 0;
};

}  // namespace meshloom::kernels
