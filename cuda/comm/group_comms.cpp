#include "cuda/comm/group_comms.hpp"

#include <string>

#include "base/check.hpp"
#include "base/log.hpp"
#include "cuda/kernels/common/check.cuh"

namespace meshloom::kernels {

GroupComms::GroupComms(ncclComm_t parent, size_t capacity) : parent_(parent), lru_(capacity) {
  ML_CHECK(parent_ != nullptr, "group communicators need the trainers' communicator");
  NCCL_CHECK(ncclCommUserRank(parent_, &trainer_));
}

GroupComms::~GroupComms() {
  for (const MemberSet& set : lru_.sets()) {
    ncclComm_t comm = comms_[set];
    if (!comm) continue;
    const ncclResult_t rc = ncclCommDestroy(comm);  // never fail in a destructor
    if (rc != ncclSuccess) LOG_WARN("ncclCommDestroy: %s", ncclGetErrorString(rc));
  }
}

void GroupComms::prepare(const std::vector<std::vector<int>>& step_groups) {
  int parent_size = 0;
  NCCL_CHECK(ncclCommCount(parent_, &parent_size));
  const std::vector<MemberSet> step_sets = distinct_member_sets(step_groups);
  for (const MemberSet& s : step_sets)
    ML_CHECK(s.back() < parent_size,
             "group " + to_string(s) + " names a trainer beyond " + std::to_string(parent_size));
  const MemberSetLru::Plan plan = lru_.prepare(step_sets);
  // Evict first (bounded resources), in the plan's order: the same everywhere.
  for (const MemberSet& set : plan.evict) {
    auto it = comms_.find(set);
    ML_CHECK(it != comms_.end(), "group cache out of step for " + to_string(set));
    if (it->second) NCCL_CHECK(ncclCommDestroy(it->second));
    comms_.erase(it);
  }
  for (const auto& round : split_rounds(plan.create)) {
    const int colour = split_colour(plan.create, round, trainer_);
    ncclComm_t comm = nullptr;
    // key = trainer index: the new ranks follow the sorted member set.
    NCCL_CHECK(
        ncclCommSplit(parent_, colour < 0 ? NCCL_SPLIT_NOCOLOR : colour, trainer_, &comm, nullptr));
    ++splits_;
    for (size_t i = 0; i < round.size(); ++i)
      comms_[plan.create[round[i]]] = int(i) == colour ? comm : nullptr;
  }
}

bool GroupComms::contains(std::span<const int> members) const {
  return lru_.contains(member_set(members));
}

ncclComm_t GroupComms::get(std::span<const int> members) const {
  const MemberSet set = member_set(members);
  auto it = comms_.find(set);
  ML_CHECK(it != comms_.end(), "group " + to_string(set) + " was not prepared for this step");
  ML_CHECK(it->second != nullptr,
           "trainer " + std::to_string(trainer_) + " is not a member of group " + to_string(set));
  return it->second;
}

}  // namespace meshloom::kernels
