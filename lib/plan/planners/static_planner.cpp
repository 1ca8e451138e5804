#include "plan/planners/static_planner.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <queue>

#include "base/check.hpp"
#include "base/strings.hpp"

namespace meshloom::plan {

int32_t static_cp_degree(int64_t seq_len_max, int64_t capacity, int32_t trainers) {
  int64_t need = 1;
  if (seq_len_max > capacity) {
    const int64_t half = capacity / 2;  // a member holds two chunks of at most C/2
    if (half < 1)
      throw Error(
          strf("static grid: capacity %lld cannot hold a padded chunk pair", (long long)capacity));
    need = (seq_len_max + 2 * half - 1) / (2 * half);
  }
  for (int64_t d = need; d <= trainers; ++d)
    if (trainers % d == 0) return int32_t(d);
  throw Error(
      strf("static grid: sequences of %lld tokens need CP >= %lld at capacity %lld, "
           "more than the %d trainers",
           (long long)seq_len_max, (long long)need, (long long)capacity, trainers));
}

Plan plan_static(const std::vector<int64_t>& lengths, const PlannerOptions& o,
                 const CostModel& cost) {
  const int32_t n = int32_t(lengths.size());
  const int32_t T = o.trainers;
  const int64_t C = o.capacity;
  int64_t longest = 1;
  for (int64_t L : lengths) longest = std::max(longest, L);
  const int64_t lmax = o.seq_len_max > 0 ? o.seq_len_max : longest;
  if (longest > lmax)
    throw Error(strf("static grid: a sequence of %lld tokens is longer than seq_len_max %lld",
                     (long long)longest, (long long)lmax));
  const int32_t cp = static_cp_degree(lmax, C, T);
  const int32_t dp = T / cp;

  // Best fit decreasing by padded slots per member into micro-batches of C.
  std::vector<int32_t> order(n);
  for (int32_t i = 0; i < n; ++i) order[i] = i;
  std::vector<int64_t> slots(n);
  for (int32_t i = 0; i < n; ++i) slots[i] = member_slots(lengths[i], cp, ChunkRule::kPadded);
  std::sort(order.begin(), order.end(), [&](int32_t x, int32_t y) {
    return slots[x] != slots[y] ? slots[x] > slots[y] : x < y;
  });
  std::vector<std::vector<int32_t>> bins;
  std::vector<double> bin_tokens;
  std::multimap<int64_t, int32_t> room;
  for (int32_t i : order) {
    auto it = room.lower_bound(slots[i]);
    int32_t b;
    if (it == room.end()) {
      bins.emplace_back();
      bin_tokens.push_back(0);
      b = int32_t(bins.size() - 1);
      room.emplace(C - slots[i], b);
    } else {
      b = it->second;
      const int64_t left = it->first - slots[i];
      room.erase(it);
      room.emplace(left, b);
    }
    bins[b].push_back(i);
    bin_tokens[b] += double(lengths[i]);
  }

  // Deal micro-batches to DP ranks by tokens (largest first, to the lightest).
  std::vector<int32_t> bin_order(bins.size());
  for (size_t j = 0; j < bins.size(); ++j) bin_order[j] = int32_t(j);
  std::stable_sort(bin_order.begin(), bin_order.end(),
                   [&](int32_t x, int32_t y) { return bin_tokens[x] > bin_tokens[y]; });
  using TokensRank = std::pair<double, int32_t>;
  std::priority_queue<TokensRank, std::vector<TokensRank>, std::greater<TokensRank>> heap;
  for (int32_t d = 0; d < dp; ++d) heap.push({0.0, d});
  std::vector<int32_t> bin_dp(bins.size());
  for (int32_t j : bin_order) {
    const TokensRank top = heap.top();
    heap.pop();
    bin_dp[j] = top.second;
    heap.push({top.first + bin_tokens[j], top.second});
  }

  PlanBuilder b(config::enum_name(config::Planner::static_grid), T, C, ChunkRule::kPadded, lengths,
                cost);
  std::vector<int32_t> members(cp);
  for (size_t j = 0; j < bins.size(); ++j) {
    for (int32_t c = 0; c < cp; ++c) members[c] = bin_dp[j] * cp + c;
    for (int32_t i : bins[j]) b.set_group(i, members);
  }
  for (size_t pos = 0; pos < bin_order.size(); ++pos) {
    const int32_t j = bin_order[pos];
    b.add_ring(double(pos), bins[j]);
  }
  return b.finish(cost, cp);
}

}  // namespace meshloom::plan
