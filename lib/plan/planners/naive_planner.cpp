#include "plan/planners/naive_planner.hpp"

#include <algorithm>

#include "plan/planners/sequence_work.hpp"

namespace meshloom::plan {

Plan plan_naive(const std::vector<int64_t>& lengths, const PlannerOptions& o,
                const CostModel& cost) {
  SequenceWork w(lengths, o, cost);
  const int32_t n = w.n();
  const int32_t T = o.trainers;
  PlanBuilder b(config::enum_name(config::Planner::naive), T, o.capacity, ChunkRule::kBalanced,
                lengths, cost);
  std::vector<int32_t> split_ids, whole_ids;
  for (int32_t i = 0; i < n; ++i) {
    (w.k[i] > 1 ? split_ids : whole_ids).push_back(i);
    if (w.r[i] > 0) b.set_offload(i, w.r[i]);
  }
  auto by_length = [&](int32_t x, int32_t y) {
    return lengths[x] != lengths[y] ? lengths[x] > lengths[y] : x < y;
  };
  std::sort(split_ids.begin(), split_ids.end(), by_length);
  std::sort(whole_ids.begin(), whole_ids.end(), by_length);
  std::vector<double> tokens(T, 0.0);
  std::vector<int32_t> members;
  int32_t cursor = 0;
  int64_t wave = 0;
  for (int32_t i : split_ids) {
    if (cursor + w.k[i] > T) {
      cursor = 0;
      ++wave;
    }
    members.resize(w.k[i]);
    for (int32_t j = 0; j < w.k[i]; ++j) {
      members[j] = cursor + j;
      tokens[cursor + j] += double(member_slots(lengths[i], w.k[i], j, ChunkRule::kBalanced));
    }
    cursor += w.k[i];
    b.set_group(i, members);
    b.add_ring(double(wave), std::span<const int32_t>(&i, 1));
  }
  auto bins = pack_best_fit(whole_ids, w);
  std::vector<double> bin_tokens(bins.size(), 0.0);
  std::vector<int32_t> bin_order(bins.size());
  for (size_t j = 0; j < bins.size(); ++j) {
    bin_order[j] = int32_t(j);
    for (int32_t i : bins[j]) bin_tokens[j] += double(lengths[i]);
  }
  std::stable_sort(bin_order.begin(), bin_order.end(),
                   [&](int32_t x, int32_t y) { return bin_tokens[x] > bin_tokens[y]; });
  std::vector<TimeRank> init(T);
  for (int32_t t = 0; t < T; ++t) init[t] = {tokens[t], t};
  MinHeap heap(std::greater<TimeRank>(), std::move(init));
  std::vector<Piece> pcs;
  int64_t next = 0;
  for (int32_t j : bin_order) {
    const TimeRank top = heap.top();
    heap.pop();
    pcs.clear();
    for (int32_t i : bins[j]) {
      pcs.push_back(Piece{i, 0});
      b.set_group(i, top.second);
    }
    b.add_micro_batch(top.second, double(wave + 1 + next++), pcs);
    heap.push({top.first + bin_tokens[j], top.second});
  }
  return b.finish(cost);
}

}  // namespace meshloom::plan
