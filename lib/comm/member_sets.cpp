#include "comm/member_sets.hpp"

#include <algorithm>
#include <set>
#include <string>

#include "base/check.hpp"

namespace meshloom::comm {

std::string to_string(const MemberSet& set) {
  std::string text = "{";
  for (size_t i = 0; i < set.size(); ++i) {
    if (i > 0) text += ',';
    text += std::to_string(set[i]);
  }
  return text + '}';
}

MemberSet member_set(std::span<const int> members) {
  MemberSet set(members.begin(), members.end());
  std::sort(set.begin(), set.end());
  ML_CHECK(set.empty() || set.front() >= 0, "a group lists a negative trainer index");
  ML_CHECK(std::adjacent_find(set.begin(), set.end()) == set.end(),
           "a group lists a trainer twice");
  return set;
}

std::vector<MemberSet> distinct_member_sets(const std::vector<std::vector<int>>& groups) {
  std::vector<MemberSet> out;
  std::set<MemberSet> seen;
  for (const auto& g : groups) {
    MemberSet s = member_set(g);
    ML_CHECK(!s.empty(), "an empty group");
    if (seen.insert(s).second) out.push_back(std::move(s));
  }
  return out;
}

static bool disjoint(const MemberSet& a, const MemberSet& b) {
  // Both sorted: a merge walk.
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (a[i] == b[j]) return false;
    if (a[i] < b[j])
      ++i;
    else
      ++j;
  }
  return true;
}

std::vector<std::vector<size_t>> split_rounds(const std::vector<MemberSet>& sets) {
  std::vector<std::vector<size_t>> rounds;
  for (size_t s = 0; s < sets.size(); ++s) {
    bool placed = false;
    for (auto& round : rounds) {
      bool fits = true;
      for (size_t other : round) fits = fits && disjoint(sets[s], sets[other]);
      if (fits) {
        round.push_back(s);
        placed = true;
        break;
      }
    }
    if (!placed) rounds.push_back({s});
  }
  return rounds;
}

int split_colour(const std::vector<MemberSet>& sets, const std::vector<size_t>& round,
                 int trainer) {
  for (size_t i = 0; i < round.size(); ++i) {
    const MemberSet& s = sets[round[i]];
    if (std::binary_search(s.begin(), s.end(), trainer)) return int(i);
  }
  return -1;
}

RingPeers ring_peers(std::span<const int> members, int me) {
  const int k = int(members.size());
  ML_CHECK(me >= 0 && me < k,
           "ring member index " + std::to_string(me) + " out of range for " + std::to_string(k));
  return RingPeers{members[size_t((me + 1) % k)], members[size_t((me + k - 1) % k)]};
}

GroupCommStats& GroupCommStats::operator+=(const GroupCommStats& o) {
  hits += o.hits;
  misses += o.misses;
  splits += o.splits;
  evictions += o.evictions;
  split_seconds += o.split_seconds;
  held_bytes = o.held_bytes;
  return *this;
}

MemberSetLru::MemberSetLru(size_t capacity, int64_t byte_budget)
    : capacity_(capacity), byte_budget_(byte_budget) {
  ML_CHECK(capacity_ > 0, "the group communicator cache needs a capacity of at least 1");
  ML_CHECK(byte_budget_ >= 0, "the group communicator cache's byte budget is negative");
}

MemberSetLru::Plan MemberSetLru::prepare(const std::vector<MemberSet>& step_sets) {
  Plan plan;
  std::set<MemberSet> in_step;
  for (const MemberSet& s : step_sets) {
    if (!in_step.insert(s).second) continue;  // listed twice: one touch
    auto it = where_.find(s);
    if (it != where_.end()) {
      order_.splice(order_.begin(), order_, it->second.at);  // iterators stay valid
    } else {
      order_.push_front(s);
      auto known = cost_by_size_.find(s.size());
      const int64_t predicted = known == cost_by_size_.end() ? 0 : known->second;
      where_[s] = Entry{order_.begin(), predicted};
      bytes_ += predicted;
      plan.create.push_back(s);
    }
  }
  step_sets_ = in_step.size();
  // This step's sets are now the front of the list: evicting from the back
  // while above max(capacity, step size) never reaches one of them.
  const size_t keep = std::max(capacity_, step_sets_);
  while (over(keep)) drop_back(plan.evict);
  return plan;
}

void MemberSetLru::settle(const MemberSet& set, int64_t bytes) {
  auto it = where_.find(set);
  ML_CHECK(it != where_.end(), "the group cache settles " + to_string(set) + ", which it lacks");
  ML_CHECK(bytes >= 0, "group " + to_string(set) + " measured at a negative cost");
  bytes_ += bytes - it->second.bytes;
  it->second.bytes = bytes;
  int64_t& known = cost_by_size_[set.size()];
  known = std::max(known, bytes);
}

std::vector<MemberSet> MemberSetLru::trim() {
  std::vector<MemberSet> evicted;
  while (over(std::max(capacity_, step_sets_))) drop_back(evicted);
  return evicted;
}

bool MemberSetLru::over(size_t keep) const {
  if (order_.size() <= step_sets_) return false;  // only the step's sets left
  return order_.size() > keep || (byte_budget_ > 0 && bytes_ > byte_budget_);
}

void MemberSetLru::drop_back(std::vector<MemberSet>& evicted) {
  auto it = where_.find(order_.back());
  bytes_ -= it->second.bytes;
  where_.erase(it);
  evicted.push_back(std::move(order_.back()));
  order_.pop_back();
}

int64_t MemberSetLru::bytes_of(const MemberSet& set) const {
  auto it = where_.find(set);
  return it == where_.end() ? 0 : it->second.bytes;
}

std::vector<MemberSet> MemberSetLru::sets() const {
  return std::vector<MemberSet>(order_.rbegin(), order_.rend());
}

}  // namespace meshloom::comm
