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
// The cache is bounded, least recently used out, by a count and by the
// device memory its communicators hold. NCCL says nothing of a
// communicator's memory and takes its buffers lazily, at the first message
// to each peer; so right after a split the members exchange a byte with
// every peer (what a ring or an all-to-all connects), the device's free
// memory before and after is the communicator's cost, and one all-reduce
// (max) over the parent gives every trainer the same cost per new set
// (comm/member_sets.hpp has the eviction rule). An evicted communicator is
// destroyed, which in current NCCL is collective over its members: they all
// evict it at the same point of the same sequence, so none waits alone.
// Splits block the host until every trainer joins: call prepare() at the
// start of a step, not while this host waits on work that needs the others.
//
//   GroupComms groups(trainers.get());
//   groups.prepare(step_groups);                 // every trainer, same list
//   ncclComm_t g = groups.get(my_group);         // ranks: sorted member order
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "comm/member_sets.hpp"
#include "kernels/host/device_buffer.hpp"

namespace meshloom::cuda {

struct GroupCommsOptions {
  size_t capacity = 64;     // member sets held at most
  int64_t byte_budget = 0;  // device memory their communicators hold at most (0: no bound)
  double timeout_s = 600;   // how long the warm-up and the agreement may wait
};

class GroupComms {
 public:
  // `parent`: the trainers' communicator, on the current device; it must
  // outlive this object.
  explicit GroupComms(ncclComm_t parent, GroupCommsOptions options = {});
  // Destroys every communicator held, least recent first (the same order on
  // every trainer).
  ~GroupComms();
  GroupComms(const GroupComms&) = delete;
  GroupComms& operator=(const GroupComms&) = delete;

  // Collective over the parent: every trainer calls it with the same groups
  // (trainer indices; any order within a group) in the same order. Evicts
  // and destroys old sets beyond the bounds, splits the new ones, measures
  // them, and evicts again what they took beyond the budget.
  comm::GroupCommStats prepare(const std::vector<std::vector<int>>& step_groups);

  // The communicator of a prepared group that holds this trainer. Its ranks
  // follow the sorted member set (the ring order is the caller's business).
  ncclComm_t get(std::span<const int> members) const;
  bool contains(std::span<const int> members) const;

  int trainer() const { return trainer_; }
  size_t size() const { return lru_.size(); }
  size_t splits() const { return splits_; }       // ncclCommSplit calls so far
  int64_t bytes() const { return lru_.bytes(); }  // the held communicators' measured memory
  int64_t bytes_of(std::span<const int> members) const;

 private:
  // Splits one round of disjoint new sets; returns this trainer's
  // communicator (null where it is in none) and its measured bytes.
  ncclComm_t split_round(int colour, int64_t* bytes);
  // Sends and receives a byte with every other member, so that NCCL
  // connects to each peer now.
  void connect_peers(ncclComm_t comm);
  // The largest of each entry over the parent's trainers.
  std::vector<int64_t> agree_max(const std::vector<int64_t>& mine);
  void destroy(const std::vector<comm::MemberSet>& sets, comm::GroupCommStats& stats);

  ncclComm_t parent_;
  GroupCommsOptions options_;
  int trainer_ = 0, parent_size_ = 1;
  cudaStream_t stream_ = nullptr;
  DeviceBuffer<uint8_t> peer_bytes_;  // connect_peers' byte to and from each peer
  DeviceBuffer<int64_t> agreed_;      // agree_max's costs
  comm::MemberSetLru lru_;
  std::map<comm::MemberSet, ncclComm_t> comms_;  // null where this trainer is not a member
  size_t splits_ = 0;
};

}  // namespace meshloom::cuda
