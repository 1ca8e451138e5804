#include "plan/node_placement.hpp"

#include <algorithm>
#include <functional>
#include <numeric>
#include <tuple>

#include "base/check.hpp"
#include "base/strings.hpp"

namespace meshloom::plan {

FreeTrainers::FreeTrainers(const CostModel& cost, int32_t trainers)
    : node_(size_t(trainers)), free_at_(size_t(trainers), 0.0) {
  for (int32_t t = 0; t < trainers; ++t) {
    const int32_t n = cost.node_of(t);
    ML_CHECK(n >= 0, strf("trainer %d has no node", t));
    node_[size_t(t)] = n;
    if (size_t(n) >= by_node_.size()) by_node_.resize(size_t(n) + 1);
    all_.insert({0.0, t});
    by_node_[size_t(n)].insert({0.0, t});
  }
}

RingPick FreeTrainers::earliest(int32_t k) const {
  ML_CHECK(k >= 1 && size_t(k) <= all_.size(), strf("a ring of %d", k));
  RingPick p;
  auto it = all_.begin();
  for (int32_t j = 0; j < k; ++j, ++it) {
    p.start = it->first;
    p.ranks.push_back(it->second);
  }
  std::sort(p.ranks.begin(), p.ranks.end());
  return p;
}

std::optional<RingPick> FreeTrainers::earliest_in_one_node(int32_t k) const {
  // (start, trainers still free by then, node): the least wins.
  std::optional<std::tuple<double, size_t, size_t>> best;
  for (size_t n = 0; n < by_node_.size(); ++n) {
    const std::set<TimeRank>& free = by_node_[n];
    if (free.size() < size_t(k)) continue;
    auto it = std::next(free.begin(), k - 1);
    const double start = it->first;
    size_t left = 0;
    for (++it; it != free.end() && it->first <= start; ++it) ++left;
    const auto key = std::make_tuple(start, left, n);
    if (!best || key < *best) best = key;
  }
  if (!best) return std::nullopt;
  RingPick p;
  p.start = std::get<0>(*best);
  auto it = by_node_[std::get<2>(*best)].begin();
  for (int32_t j = 0; j < k; ++j, ++it) p.ranks.push_back(it->second);
  std::sort(p.ranks.begin(), p.ranks.end());
  return p;
}

void FreeTrainers::occupy(std::span<const int32_t> ranks, double until) {
  for (int32_t t : ranks) {
    const TimeRank was{free_at_[size_t(t)], t};
    all_.erase(was);
    by_node_[size_t(node_[size_t(t)])].erase(was);
    free_at_[size_t(t)] = until;
    all_.insert({until, t});
    by_node_[size_t(node_[size_t(t)])].insert({until, t});
  }
}

std::vector<std::vector<int32_t>> shelf_ranks_by_node(const CostModel& cost, int32_t trainers,
                                                      std::span<const int32_t> ks) {
  std::vector<std::vector<int32_t>> free;  // per node, its free ranks, decreasing
  for (int32_t t = trainers - 1; t >= 0; --t) {
    const int32_t n = cost.node_of(t);
    ML_CHECK(n >= 0, strf("trainer %d has no node", t));
    if (size_t(n) >= free.size()) free.resize(size_t(n) + 1);
    free[size_t(n)].push_back(t);
  }
  std::vector<size_t> order(ks.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return ks[x] > ks[y]; });
  std::vector<std::vector<int32_t>> out(ks.size());
  std::vector<size_t> left_over;
  for (size_t j : order) {
    const size_t k = size_t(ks[j]);
    size_t best = free.size();
    for (size_t n = 0; n < free.size(); ++n)
      if (free[n].size() >= k && (best == free.size() || free[n].size() < free[best].size()))
        best = n;
    if (best == free.size()) {
      left_over.push_back(j);
      continue;
    }
    for (size_t m = 0; m < k; ++m) {
      out[j].push_back(free[best].back());
      free[best].pop_back();
    }
  }
  std::vector<int32_t> rest;
  for (const auto& f : free) rest.insert(rest.end(), f.begin(), f.end());
  std::sort(rest.begin(), rest.end(), std::greater<int32_t>());
  for (size_t j : left_over) {
    const size_t k = size_t(ks[j]);
    ML_CHECK(rest.size() >= k, strf("a shelf of rings wider than the %d trainers", trainers));
    for (size_t m = 0; m < k; ++m) {
      out[j].push_back(rest.back());
      rest.pop_back();
    }
  }
  return out;
}

}  // namespace meshloom::plan
