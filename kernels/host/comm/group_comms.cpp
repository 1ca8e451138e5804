#include "kernels/host/comm/group_comms.hpp"

#include <span>
#include <string>

#include "base/check.hpp"
#include "base/clock.hpp"
#include "base/log.hpp"
#include "kernels/device/common/check.cuh"
#include "kernels/host/comm/nccl_comm.hpp"

namespace meshloom::cuda {

GroupComms::GroupComms(ncclComm_t parent, GroupCommsOptions options)
    : parent_(parent), options_(options), lru_(options.capacity, options.byte_budget) {
  ML_CHECK(parent_ != nullptr, "group communicators need the trainers' communicator");
  NCCL_CHECK(ncclCommUserRank(parent_, &trainer_));
  NCCL_CHECK(ncclCommCount(parent_, &parent_size_));
  check_current_device(parent_, "the group communicators' parent");
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  // Allocated now, so that no measurement counts them: a byte to and from
  // each peer.
  peer_bytes_.resize(2 * size_t(parent_size_));
}

GroupComms::~GroupComms() {
  for (const comm::MemberSet& set : lru_.sets()) {
    ncclComm_t comm = comms_[set];
    if (!comm) continue;
    const ncclResult_t rc = ncclCommDestroy(comm);  // never fail in a destructor
    if (rc != ncclSuccess) LOG_WARN("ncclCommDestroy: %s", ncclGetErrorString(rc));
  }
  if (stream_) cudaStreamDestroy(stream_);
}

comm::GroupCommStats GroupComms::prepare(const std::vector<std::vector<int>>& step_groups) {
  const std::vector<comm::MemberSet> step_sets = comm::distinct_member_sets(step_groups);
  for (const comm::MemberSet& s : step_sets)
    ML_CHECK(s.back() < parent_size_, "group " + comm::to_string(s) + " names a trainer beyond " +
                                          std::to_string(parent_size_));
  comm::GroupCommStats stats;
  for (const comm::MemberSet& s : step_sets) (lru_.contains(s) ? stats.hits : stats.misses) += 1;
  const comm::MemberSetLru::Plan plan = lru_.prepare(step_sets);
  // Evict first (bounded resources), in the plan's order: the same everywhere.
  destroy(plan.evict, stats);
  const auto start = Clock::now();
  if (!plan.create.empty()) {
    agreed_.resize(plan.create.size());  // before any measurement
    std::vector<int64_t> measured(plan.create.size(), 0);
    for (const auto& round : comm::split_rounds(plan.create)) {
      const int colour = comm::split_colour(plan.create, round, trainer_);
      int64_t bytes = 0;
      ncclComm_t comm = split_round(colour, &bytes);
      ++splits_;
      ++stats.splits;
      for (size_t i = 0; i < round.size(); ++i) {
        const bool mine = int(i) == colour;
        comms_[plan.create[round[i]]] = mine ? comm : nullptr;
        if (mine) measured[round[i]] = bytes;
      }
    }
    const std::vector<int64_t> cost = agree_max(measured);
    for (size_t i = 0; i < plan.create.size(); ++i) lru_.settle(plan.create[i], cost[i]);
    destroy(lru_.trim(), stats);
  }
  stats.split_seconds = seconds_since(start);
  stats.held_bytes = lru_.bytes();
  return stats;
}

ncclComm_t GroupComms::split_round(int colour, int64_t* bytes) {
  // Every earlier kernel and allocation of this process done, so that the
  // difference is NCCL's.
  CUDA_CHECK(cudaDeviceSynchronize());
  size_t free_before = 0, free_after = 0, total = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_before, &total));
  ncclComm_t comm = nullptr;
  // key = trainer index: the new ranks follow the sorted member set.
  NCCL_CHECK(
      ncclCommSplit(parent_, colour < 0 ? NCCL_SPLIT_NOCOLOR : colour, trainer_, &comm, nullptr));
  *bytes = 0;
  if (!comm) return nullptr;
  connect_peers(comm);
  CUDA_CHECK(cudaMemGetInfo(&free_after, &total));
  *bytes = free_before > free_after ? int64_t(free_before - free_after) : 0;
  return comm;
}

void GroupComms::connect_peers(ncclComm_t comm) {
  int k = 0, me = 0;
  NCCL_CHECK(ncclCommCount(comm, &k));
  NCCL_CHECK(ncclCommUserRank(comm, &me));
  if (k < 2) return;
  uint8_t* out = peer_bytes_.data();
  uint8_t* in = out + k;
  NCCL_CHECK(ncclGroupStart());
  for (int p = 0; p < k; ++p) {
    if (p == me) continue;
    NCCL_CHECK(ncclSend(out + p, 1, ncclUint8, p, comm, stream_));
    NCCL_CHECK(ncclRecv(in + p, 1, ncclUint8, p, comm, stream_));
  }
  NCCL_CHECK(ncclGroupEnd());
  wait_stream(stream_, comm, options_.timeout_s, "the first exchange on a new group communicator");
}

std::vector<int64_t> GroupComms::agree_max(const std::vector<int64_t>& mine) {
  upload_sync(agreed_.data(), std::span<const int64_t>(mine), stream_);
  NCCL_CHECK(ncclAllReduce(agreed_.data(), agreed_.data(), mine.size(), ncclInt64, ncclMax, parent_,
                           stream_));
  wait_stream(stream_, parent_, options_.timeout_s,
              "the agreement on new group communicators' memory");
  std::vector<int64_t> cost(mine.size());
  download_sync(std::span<int64_t>(cost), agreed_.data(), stream_);
  return cost;
}

void GroupComms::destroy(const std::vector<comm::MemberSet>& sets, comm::GroupCommStats& stats) {
  for (const comm::MemberSet& set : sets) {
    auto it = comms_.find(set);
    ML_CHECK(it != comms_.end(), "group cache out of step for " + comm::to_string(set));
    if (it->second) NCCL_CHECK(ncclCommDestroy(it->second));
    comms_.erase(it);
    ++stats.evictions;
  }
}

bool GroupComms::contains(std::span<const int> members) const {
  return lru_.contains(comm::member_set(members));
}

int64_t GroupComms::bytes_of(std::span<const int> members) const {
  return lru_.bytes_of(comm::member_set(members));
}

ncclComm_t GroupComms::get(std::span<const int> members) const {
  const comm::MemberSet set = comm::member_set(members);
  auto it = comms_.find(set);
  ML_CHECK(it != comms_.end(), "group " + comm::to_string(set) + " was not prepared for this step");
  ML_CHECK(it->second != nullptr, "trainer " + std::to_string(trainer_) +
                                      " is not a member of group " + comm::to_string(set));
  return it->second;
}

}  // namespace meshloom::cuda
