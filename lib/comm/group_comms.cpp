#include "comm/group_comms.hpp"

#include "base/check.hpp"
#include "base/clock.hpp"
#include "comm/mpi_check.hpp"

namespace meshloom::comm {

MpiGroupComms::MpiGroupComms(MPI_Comm parent, size_t capacity) : parent_(parent), lru_(capacity) {
  MPI_CHECK(MPI_Comm_rank(parent_, &rank_));
  MPI_CHECK(MPI_Comm_size(parent_, &size_));
}

MpiGroupComms::~MpiGroupComms() {
  for (auto& [set, comm] : comms_)
    if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
}

GroupCommStats MpiGroupComms::prepare(const std::vector<std::vector<int>>& step_groups) {
  const std::vector<MemberSet> step_sets = distinct_member_sets(step_groups);
  for (const MemberSet& s : step_sets)
    ML_CHECK(s.back() < size_, "group " + to_string(s) + " names a rank beyond the " +
                                   std::to_string(size_) + " of its parent");
  GroupCommStats stats;
  for (const MemberSet& s : step_sets) (lru_.contains(s) ? stats.hits : stats.misses) += 1;
  const MemberSetLru::Plan plan = lru_.prepare(step_sets);
  // Evict first (bounded resources), in the plan's order: the same everywhere.
  for (const MemberSet& set : plan.evict) {
    auto it = comms_.find(set);
    ML_CHECK(it != comms_.end(), "group cache out of step for " + to_string(set));
    if (it->second != MPI_COMM_NULL) MPI_CHECK(MPI_Comm_free(&it->second));
    comms_.erase(it);
    ++stats.evictions;
  }
  const auto start = Clock::now();
  for (const auto& round : split_rounds(plan.create)) {
    const int colour = split_colour(plan.create, round, rank_);
    MPI_Comm comm = MPI_COMM_NULL;
    // key = rank in the parent: the new ranks follow the sorted member set.
    MPI_CHECK(MPI_Comm_split(parent_, colour < 0 ? MPI_UNDEFINED : colour, rank_, &comm));
    if (comm != MPI_COMM_NULL) MPI_CHECK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
    ++stats.splits;
    for (size_t i = 0; i < round.size(); ++i) {
      const MemberSet& set = plan.create[round[i]];
      comms_[set] = int(i) == colour ? comm : MPI_COMM_NULL;
      split_log_.push_back(set);
    }
  }
  stats.split_seconds = seconds_since(start);
  return stats;
}

bool MpiGroupComms::contains(std::span<const int> members) const {
  return lru_.contains(member_set(members));
}

MPI_Comm MpiGroupComms::get(std::span<const int> members) const {
  const MemberSet set = member_set(members);
  auto it = comms_.find(set);
  ML_CHECK(it != comms_.end(), "group " + to_string(set) + " was not prepared for this step");
  ML_CHECK(it->second != MPI_COMM_NULL,
           "rank " + std::to_string(rank_) + " is not a member of group " + to_string(set));
  return it->second;
}

}  // namespace meshloom::comm
