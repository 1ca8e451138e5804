#include "plan/planners/bytescale_planner.hpp"

#include <algorithm>
#include <cmath>

#include "plan/planners/sequence_work.hpp"

namespace meshloom::plan {

namespace {

// ByteScale's buckets: sequences longest first, cut into as many buckets as
// the step has rounds of T x C tokens, each holding an equal share of the work.
std::vector<std::vector<int32_t>> flop_buckets(const SequenceWork& w,
                                               const std::vector<int64_t>& lengths, int32_t T,
                                               int64_t C) {
  const int32_t n = w.n();
  std::vector<int32_t> order(n);
  for (int32_t i = 0; i < n; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](int32_t x, int32_t y) {
    return lengths[x] != lengths[y] ? lengths[x] > lengths[y] : x < y;
  });
  double total_tokens = 0, total_work = 0;
  for (int32_t i = 0; i < n; ++i) {
    total_tokens += double(lengths[i]);
    total_work += w.work(i);
  }
  const int64_t nb =
      std::max<int64_t>(1, int64_t(std::ceil(total_tokens / (double(T) * double(C)))));
  std::vector<std::vector<int32_t>> buckets(1);
  double acc = 0;
  for (int32_t i : order) {
    if (acc >= total_work * double(buckets.size()) / double(nb) && !buckets.back().empty() &&
        int64_t(buckets.size()) < nb)
      buckets.emplace_back();
    buckets.back().push_back(i);
    acc += w.work(i);
  }
  return buckets;
}

}  // namespace

Plan plan_bytescale(const std::vector<int64_t>& lengths, const PlannerOptions& o,
                    const CostModel& cost) {
  SequenceWork w(lengths, o, cost);
  const int32_t n = w.n();
  const int32_t T = o.trainers;
  const int64_t C = o.capacity;
  PlanBuilder b(config::enum_name(config::Planner::bytescale), T, C, ChunkRule::kBalanced, lengths,
                cost);
  for (int32_t i = 0; i < n; ++i)
    if (w.r[i] > 0) b.set_offload(i, w.r[i]);

  std::vector<std::vector<int32_t>> buckets = flop_buckets(w, lengths, T, C);

  std::vector<double> exec(T, 0.0);
  std::vector<int32_t> lag, all(T), members;
  std::vector<Piece> pcs;
  struct Bin {
    int32_t trainer;
    std::vector<int32_t> items;
  };
  std::vector<Bin> bins;
  std::vector<uint8_t> done(n, 0);
  size_t front = 0;
  const double act = cost.act_bytes * cost.layers;
  int64_t round = 0;
  auto sorted_by_exec = [&](std::vector<int32_t>& v) {
    std::sort(v.begin(), v.end(),
              [&](int32_t x, int32_t y) { return exec[x] != exec[y] ? exec[x] < exec[y] : x < y; });
  };
  auto run_round = [&](const std::vector<int32_t>& who, std::vector<int32_t>& bucket) {
    size_t cursor = 0;
    int64_t assigned = 0;
    bins.clear();
    std::multimap<double, int32_t> room;
    double smallest = INFINITY;
    for (int32_t i : bucket) smallest = std::min(smallest, w.resident(i));
    for (int32_t i : bucket) {
      if (cursor == who.size() && (room.empty() || room.rbegin()->first < smallest)) break;
      if (w.k[i] > 1) {
        if (who.size() - cursor < size_t(w.k[i])) continue;
        members.assign(who.begin() + cursor, who.begin() + cursor + w.k[i]);
        cursor += w.k[i];
        std::sort(members.begin(), members.end());
        b.set_group(i, members);
        double start = 0;
        for (int32_t m : members) start = std::max(start, exec[m]);
        for (int32_t m : members) exec[m] = start + w.t[i];
        b.add_ring(double(round), std::span<const int32_t>(&i, 1));
      } else {
        const double need = w.resident(i);
        auto it = room.lower_bound(need);
        int32_t bi;
        if (it != room.end()) {  // best fit among this round's micro-batches
          bi = it->second;
          const double left = it->first - need;
          room.erase(it);
          bins[bi].items.push_back(i);
          room.emplace(left, bi);
        } else if (cursor < who.size()) {
          bins.push_back({who[cursor++], {i}});
          bi = int32_t(bins.size() - 1);
          room.emplace(double(C) * (1 + 1e-12) - need, bi);
        } else {
          continue;
        }
        b.set_group(i, bins[bi].trainer);
      }
      done[i] = 1;
      ++assigned;
    }
    for (const Bin& bin : bins) {
      pcs.clear();
      double tokens = 0, l2 = 0, off = 0;
      for (int32_t i : bin.items) {
        pcs.push_back(Piece{i, 0});
        const double L = double(lengths[i]);
        tokens += L;
        l2 += L * L;
        off += w.r[i] * L * act;
      }
      b.add_micro_batch(bin.trainer, double(round), pcs);
      exec[bin.trainer] += cost.micro_batch(tokens, l2, 1, false, off);
    }
    bucket.erase(
        std::remove_if(bucket.begin(), bucket.end(), [&](int32_t i) { return done[i] != 0; }),
        bucket.end());
    return assigned;
  };
  for (int32_t t = 0; t < T; ++t) all[t] = t;
  while (front < buckets.size()) {
    if (buckets[front].empty()) {
      ++front;
      continue;
    }
    const double mx = *std::max_element(exec.begin(), exec.end());
    lag.clear();
    for (int32_t t = 0; t < T; ++t)
      if (mx - exec[t] > o.slack * mx) lag.push_back(t);
    bool everyone = lag.empty();
    if (everyone) lag = all;
    sorted_by_exec(lag);
    int64_t assigned = run_round(lag, buckets[front]);
    if (assigned == 0 && !everyone) {
      lag = all;
      sorted_by_exec(lag);
      assigned = run_round(lag, buckets[front]);
    }
    ML_CHECK(assigned > 0, "bytescale planner made no progress");
    ++round;
  }
  return b.finish(cost);
}

}  // namespace meshloom::plan
