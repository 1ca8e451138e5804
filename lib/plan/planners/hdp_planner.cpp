#include "plan/planners/hdp_planner.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <set>

#include "base/check.hpp"
#include "base/strings.hpp"
#include "plan/io/lengths.hpp"
#include "plan/node_placement.hpp"
#include "plan/planners/bytescale_planner.hpp"
#include "plan/planners/sequence_work.hpp"
#include "plan/planners/static_planner.hpp"

namespace meshloom::plan {

namespace {

// The smallest k >= k0 whose member time is at most `target`, or the k with
// the least member time when none reaches it.
int32_t widen_to(const SequenceWork& w, size_t i, double target) {
  const int64_t L = w.lengths[i];
  const int32_t k0 = w.k[i];
  const int32_t kmax = int32_t(std::min<int64_t>(w.o.trainers, L));
  if (kmax <= k0) return k0;
  auto time = [&](int32_t kk) {
    const float r = w.o.offload ? offload_ratio_for(L, kk, w.o.capacity, w.cost) : 0.f;
    return w.time_of(L, kk, r);
  };
  int32_t best_k = k0;
  double best_t = time(k0);
  for (double x = k0;;) {
    x = std::max(x * 1.08, x + 1);
    const int32_t kk = int32_t(std::min<double>(kmax, std::floor(x)));
    const double tt = time(kk);
    if (tt < best_t) {
      best_t = tt;
      best_k = kk;
    }
    if (tt <= target || kk >= kmax) break;
  }
  if (best_t > target) return best_k;
  int32_t lo = k0, hi = best_k;  // time(lo) > target >= time(hi)
  while (hi - lo > 1) {
    const int32_t mid = lo + (hi - lo) / 2;
    (time(mid) <= target ? hi : lo) = mid;
  }
  return hi;
}

}  // namespace

namespace {

// Steps 2-5 of plan_hdp for one widening target: who runs what, when.
struct Schedule {
  SequenceWork w;
  std::vector<int32_t> split_ids, whole_ids;
  std::vector<int32_t> group_at, group_pool;  // split sequences' ranks
  std::vector<double> ring_start;
  struct Gap {
    int32_t trainer;
    double begin, end, left;
  };
  std::vector<Gap> gaps;
  std::vector<int32_t> in_gap, owner;
  std::vector<std::vector<int32_t>> tail;
  std::vector<double> gang_end, finish;
  double makespan = 0;
  bool by_node = false;  // place rings inside nodes (node_placement.hpp), else by rank
  Schedule(const SequenceWork& work, bool place_by_node) : w(work), by_node(place_by_node) {}
};

// Widens split sequences whose member time exceeds `factor` x the bound
// max(total work / T, largest whole sequence); factor 0: no widening;
// factor < 0: every split sequence as wide as it can usefully go (up to all
// T trainers: split sequences then take turns on the whole mesh).
void widen(SequenceWork& w, double factor) {
  if (factor == 0) return;
  const int32_t n = w.n();
  if (factor < 0) {
    for (int32_t i = 0; i < n; ++i) {
      if (w.lengths[i] <= w.o.capacity) continue;
      const int32_t kk = widen_to(w, i, 0.0);
      w.set(i, kk, w.o.offload ? offload_ratio_for(w.lengths[i], kk, w.o.capacity, w.cost) : 0.f);
    }
    return;
  }
  for (int iter = 0; iter < 2; ++iter) {
    double total = 0, largest_whole = 0;
    for (int32_t i = 0; i < n; ++i) {
      total += w.work(i);
      if (w.k[i] == 1) largest_whole = std::max(largest_whole, w.t[i]);
    }
    const double target = factor * std::max(total / w.o.trainers, largest_whole);
    bool changed = false;
    for (int32_t i = 0; i < n; ++i) {
      // Longer than C: malleable, even when offloading let it run whole.
      if (w.lengths[i] <= w.o.capacity || w.t[i] <= target * (1 + 1e-9)) continue;
      const int32_t kk = widen_to(w, i, target);
      if (kk != w.k[i]) {
        w.set(i, kk, w.o.offload ? offload_ratio_for(w.lengths[i], kk, w.o.capacity, w.cost) : 0.f);
        changed = true;
      }
    }
    if (!changed) break;
  }
}

// Records a ring of sequence i on `ranks` (sorted) starting at `start`; the
// members that were free before `start` leave gaps. fin: per-trainer end of
// its last ring.
void add_gang(Schedule& sc, int32_t i, std::span<const int32_t> ranks, double start,
              std::vector<double>& fin) {
  SequenceWork& w = sc.w;
  sc.group_at[i] = int32_t(sc.group_pool.size());
  sc.group_pool.insert(sc.group_pool.end(), ranks.begin(), ranks.end());
  // A ring inside one node runs on the faster link.
  if (w.cost.one_node(ranks)) w.t[i] = w.time_of(w.lengths[i], w.k[i], w.r[i], true);
  for (int32_t t : ranks) {
    if (start - fin[t] > 1e-12 * (1 + start)) sc.gaps.push_back({t, fin[t], start, start - fin[t]});
    fin[t] = start + w.t[i];
  }
  sc.ring_start[i] = start;
}

// 3a with the run's nodes (node_placement.hpp): the k trainers free earliest
// when they share a node, else the k of one node when that ring ends no later.
void place_gangs_by_node(Schedule& sc, std::vector<double>& fin) {
  SequenceWork& w = sc.w;
  FreeTrainers free(w.cost, w.o.trainers);
  const int32_t widest_node = w.cost.largest_node();
  for (int32_t i : sc.split_ids) {
    RingPick pick = free.earliest(w.k[i]);
    if (!w.cost.one_node(pick.ranks) && w.k[i] <= widest_node) {
      const std::optional<RingPick> local = free.earliest_in_one_node(w.k[i]);
      if (local &&
          local->start + w.time_of(w.lengths[i], w.k[i], w.r[i], true) <= pick.start + w.t[i])
        pick = *local;
    }
    add_gang(sc, i, pick.ranks, pick.start, fin);
    free.occupy(pick.ranks, pick.start + w.t[i]);
  }
}

// 3a. Each split sequence, costliest first, on the k trainers free earliest.
void place_gangs_greedy(Schedule& sc, std::vector<double>& fin) {
  SequenceWork& w = sc.w;
  if (sc.by_node) return place_gangs_by_node(sc, fin);
  const int32_t T = w.o.trainers;
  std::vector<TimeRank> init(T);
  for (int32_t t = 0; t < T; ++t) init[t] = {0.0, t};
  MinHeap heap(std::greater<TimeRank>(), std::move(init));
  std::vector<int32_t> ranks;
  for (int32_t i : sc.split_ids) {
    ranks.clear();
    double start = 0;
    for (int32_t j = 0; j < w.k[i]; ++j) {
      start = heap.top().first;  // the heap pops in increasing time
      ranks.push_back(heap.top().second);
      heap.pop();
    }
    std::sort(ranks.begin(), ranks.end());
    add_gang(sc, i, ranks, start, fin);
    for (int32_t t : ranks) heap.push({fin[t], t});
  }
}

// 3b. Shelves over trainers [0, region): split sequences, most work first,
// side by side while their k_min fit; each shelf then shares its region so
// that its sequences end together (the least height H such that the
// smallest k_i >= k_min with member time <= H sum to at most the region).
void place_gangs_shelves(Schedule& sc, int32_t region, std::vector<double>& fin) {
  SequenceWork& w = sc.w;
  std::vector<int32_t> ids = sc.split_ids;
  std::sort(ids.begin(), ids.end(), [&](int32_t x, int32_t y) {
    return w.work(x) != w.work(y) ? w.work(x) > w.work(y) : x < y;
  });
  auto time = [&](int32_t i, int32_t kk) {
    const float r = w.o.offload ? offload_ratio_for(w.lengths[i], kk, w.o.capacity, w.cost) : 0.f;
    return w.time_of(w.lengths[i], kk, r);
  };
  std::vector<int32_t> kmin, kbest, kk, ranks;
  double start = 0;
  for (size_t i0 = 0; i0 < ids.size();) {
    size_t i1 = i0;
    int64_t sum = 0;
    while (i1 < ids.size() && (i1 == i0 || sum + w.k[ids[i1]] <= region)) sum += w.k[ids[i1++]];
    const size_t m = i1 - i0;
    kmin.assign(m, 0);
    kbest.assign(m, 0);
    kk.assign(m, 0);
    double hi = 0;
    for (size_t j = 0; j < m; ++j) {
      const int32_t i = ids[i0 + j];
      kmin[j] = w.k[i];
      hi = std::max(hi, time(i, kmin[j]));
      // the k where more trainers stop helping (ring traffic), within the region
      const int32_t cap = int32_t(std::min<int64_t>(region, w.lengths[i]));
      kbest[j] = kmin[j];
      double tb = time(i, kmin[j]);
      for (double x = kmin[j]; kbest[j] < cap;) {
        x = std::max(x * 1.15, x + 1);
        const int32_t k2 = int32_t(std::min<double>(cap, std::floor(x)));
        const double t2 = time(i, k2);
        if (t2 >= tb) break;
        tb = t2;
        kbest[j] = k2;
        if (k2 >= cap) break;
      }
    }
    // k_j(H): smallest k in [kmin, kbest] with time <= H, or -1.
    auto k_for = [&](size_t j, double H) -> int32_t {
      const int32_t i = ids[i0 + j];
      if (time(i, kbest[j]) > H) return -1;
      int32_t k = std::max<int32_t>(kmin[j], int32_t(std::ceil(w.work(i) / H)));
      k = std::min(k, kbest[j]);
      while (k > kmin[j] && time(i, k - 1) <= H) --k;
      while (time(i, k) > H) ++k;
      return k;
    };
    auto fits = [&](double H) {
      int64_t total = 0;
      for (size_t j = 0; j < m && total <= region; ++j) {
        const int32_t k = k_for(j, H);
        if (k < 0) return false;
        total += k;
      }
      return total <= region;
    };
    double lo = 0;
    for (int it = 0; it < 30; ++it) {
      const double mid = 0.5 * (lo + hi);
      (fits(mid) ? hi : lo) = mid;
    }
    for (size_t j = 0; j < m; ++j) {
      const int32_t i = ids[i0 + j];
      const int32_t k = k_for(j, hi);
      w.set(i, k, w.o.offload ? offload_ratio_for(w.lengths[i], k, w.o.capacity, w.cost) : 0.f);
      kk[j] = k;
    }
    // Side by side from rank 0, or inside nodes where the run's nodes are known.
    std::vector<std::vector<int32_t>> placed;
    if (sc.by_node) placed = shelf_ranks_by_node(w.cost, w.o.trainers, kk);
    int32_t cursor = 0;
    for (size_t j = 0; j < m; ++j) {
      if (placed.empty()) {
        ranks.resize(kk[j]);
        for (int32_t r = 0; r < kk[j]; ++r) ranks[r] = cursor + r;
        cursor += kk[j];
      } else {
        ranks = placed[j];
      }
      add_gang(sc, ids[i0 + j], ranks, start, fin);
    }
    double end = start;
    for (size_t j = 0; j < m; ++j) end = std::max(end, start + w.t[ids[i0 + j]]);
    start = end;
    i0 = i1;
  }
}

// Steps 3-5; region 0: greedy gangs, else shelves over that many trainers.
void schedule(Schedule& sc, int32_t region) {
  SequenceWork& w = sc.w;
  const int32_t n = w.n();
  const int32_t T = w.o.trainers;
  for (int32_t i = 0; i < n; ++i) (w.k[i] > 1 ? sc.split_ids : sc.whole_ids).push_back(i);
  auto by_time = [&](int32_t x, int32_t y) { return w.t[x] != w.t[y] ? w.t[x] > w.t[y] : x < y; };
  std::sort(sc.split_ids.begin(), sc.split_ids.end(), by_time);
  std::sort(sc.whole_ids.begin(), sc.whole_ids.end(), by_time);
  sc.ring_start.assign(n, 0.0);
  sc.group_at.assign(n, -1);
  sc.gang_end.assign(T, 0.0);
  if (region > 0) {
    place_gangs_shelves(sc, region, sc.gang_end);
  } else {
    place_gangs_greedy(sc, sc.gang_end);
  }
  sc.finish = sc.gang_end;
  std::vector<TimeRank> init(T);
  for (int32_t t = 0; t < T; ++t) init[t] = {sc.gang_end[t], t};
  MinHeap heap(std::greater<TimeRank>(), std::move(init));

  // 4. Whole sequences: best fit into gaps, else LPT onto the tails.
  std::multimap<double, int32_t> gap_room;
  for (size_t g = 0; g < sc.gaps.size(); ++g) gap_room.emplace(sc.gaps[g].left, int32_t(g));
  sc.in_gap.assign(n, -1);
  sc.owner.assign(n, -1);
  sc.tail.assign(T, {});
  for (int32_t i : sc.whole_ids) {
    auto it = gap_room.lower_bound(w.t[i]);
    if (it != gap_room.end()) {
      const int32_t g = it->second;
      gap_room.erase(it);
      sc.gaps[g].left -= w.t[i];
      if (sc.gaps[g].left > 0) gap_room.emplace(sc.gaps[g].left, g);
      sc.in_gap[i] = g;
      sc.owner[i] = sc.gaps[g].trainer;
      continue;
    }
    const TimeRank top = heap.top();
    heap.pop();
    sc.owner[i] = top.second;
    sc.tail[top.second].push_back(i);
    sc.finish[top.second] = top.first + w.t[i];
    heap.push({sc.finish[top.second], top.second});
  }

  // 5. Local search between the last and the first trainer to finish.
  const int64_t budget = w.o.search_moves < 0 ? 4 * int64_t(T) : w.o.search_moves;
  std::vector<double>& finish = sc.finish;
  auto& tail = sc.tail;
  if (T > 1 && budget > 0) {
    std::set<TimeRank> order;
    for (int32_t t = 0; t < T; ++t) order.insert({finish[t], t});
    std::vector<std::pair<double, int32_t>> sorted_b;
    for (int64_t move = 0; move < budget; ++move) {
      const auto [fmax, a] = *order.rbegin();
      const auto [fmin, bt] = *order.begin();
      const double diff = fmax - fmin;
      if (a == bt || diff <= 1e-9 * fmax || tail[a].empty()) break;
      double best = fmax;
      int32_t bx = -1, by = -1;  // positions in tail[a], tail[bt] (by = -1: a move)
      for (size_t x = 0; x < tail[a].size(); ++x) {
        const double c = w.t[tail[a][x]];
        if (c < diff && std::max(fmax - c, fmin + c) < best) {
          best = std::max(fmax - c, fmin + c);
          bx = int32_t(x);
          by = -1;
        }
      }
      sorted_b.clear();
      for (size_t y = 0; y < tail[bt].size(); ++y)
        sorted_b.push_back({w.t[tail[bt][y]], int32_t(y)});
      std::sort(sorted_b.begin(), sorted_b.end());
      for (size_t x = 0; x < tail[a].size() && !sorted_b.empty(); ++x) {
        const double cx = w.t[tail[a][x]];
        // the best partner costs cx - diff/2: look at the two around that point
        auto it = std::lower_bound(sorted_b.begin(), sorted_b.end(),
                                   std::make_pair(cx - diff / 2, int32_t(-1)));
        for (auto jt : {it, it == sorted_b.begin() ? it : std::prev(it)}) {
          if (jt == sorted_b.end()) continue;
          const double d = cx - jt->first;
          if (d <= 0 || d >= diff) continue;
          if (std::max(fmax - d, fmin + d) < best) {
            best = std::max(fmax - d, fmin + d);
            bx = int32_t(x);
            by = jt->second;
          }
        }
      }
      if (bx < 0 || best >= fmax * (1 - 1e-12)) break;
      const int32_t ix = tail[a][bx];
      double delta = w.t[ix];
      tail[a].erase(tail[a].begin() + bx);
      if (by >= 0) {
        const int32_t iy = tail[bt][by];
        delta -= w.t[iy];
        tail[bt].erase(tail[bt].begin() + by);
        tail[a].push_back(iy);
        sc.owner[iy] = a;
      }
      tail[bt].push_back(ix);
      sc.owner[ix] = bt;
      order.erase(order.find({fmax, a}));
      order.erase(order.begin());
      finish[a] = fmax - delta;
      finish[bt] = fmin + delta;
      order.insert({finish[a], a});
      order.insert({finish[bt], bt});
    }
  }
  sc.makespan = *std::max_element(finish.begin(), finish.end());
}

// 6. Micro-batches: rings at their start, gap packs before them, tails after.
Plan micro_batches(const Schedule& sc, const std::vector<int64_t>& lengths, const PlannerOptions& o,
                   const CostModel& cost) {
  const SequenceWork& w = sc.w;
  const int32_t T = o.trainers;
  PlanBuilder b(config::enum_name(config::Planner::hdp), T, o.capacity, ChunkRule::kBalanced,
                lengths, cost);
  for (int32_t i = 0; i < w.n(); ++i)
    if (w.r[i] > 0) b.set_offload(i, w.r[i]);
  for (int32_t i : sc.split_ids) {
    b.set_group(i, std::span<const int32_t>(sc.group_pool.data() + sc.group_at[i], size_t(w.k[i])));
    b.add_ring(sc.ring_start[i], std::span<const int32_t>(&i, 1));
  }
  for (int32_t i : sc.whole_ids) b.set_group(i, sc.owner[i]);
  std::vector<std::vector<int32_t>> gap_items(sc.gaps.size());
  for (int32_t i : sc.whole_ids)
    if (sc.in_gap[i] >= 0) gap_items[sc.in_gap[i]].push_back(i);
  std::vector<Piece> pcs;
  auto emit = [&](int32_t trainer, const std::vector<int32_t>& items, double lo, double hi) {
    if (items.empty()) return;
    const auto bins = pack_best_fit(items, w);
    for (size_t j = 0; j < bins.size(); ++j) {
      pcs.clear();
      for (int32_t i : bins[j]) pcs.push_back(Piece{i, 0});
      b.add_micro_batch(trainer, lo + (hi - lo) * double(j + 1) / double(bins.size() + 1), pcs);
    }
  };
  for (size_t g = 0; g < sc.gaps.size(); ++g)
    emit(sc.gaps[g].trainer, gap_items[g], sc.gaps[g].begin, sc.gaps[g].end);
  for (int32_t t = 0; t < T; ++t) emit(t, sc.tail[t], sc.gang_end[t], sc.gang_end[t] + 1.0);
  return b.finish(cost);
}

// Portfolio: when no candidate came within 1% of the ideal (coarse
// batches: few sequences per trainer, lengths near multiples of C), Alg. 2's
// schedule is a candidate too, so hdp is never slower than it.
Plan with_alternatives(Plan plan, double ideal, const std::vector<int64_t>& lengths,
                       const PlannerOptions& o, const CostModel& cost) {
  if (plan.makespan() > ideal * 1.01) {
    Plan alt = plan_bytescale(lengths, o, cost);
    if (alt.makespan() < plan.makespan() * (1 - 1e-3)) {
      alt.planner = config::enum_name(config::Planner::hdp);
      plan = std::move(alt);
    }
  }
  // Static fallback (options.static_fallback): the grid's plan where it is
  // strictly faster (coarse batches, where splitting what fits in C pays), so
  // hdp is never slower than static. A grid that cannot hold the batch keeps
  // HDP's plan. Plan::static_fallback() tells the result apart.
  if (o.static_fallback) {
    try {
      Plan grid = plan_static(lengths, o, cost);
      if (grid.makespan() < plan.makespan()) {
        grid.planner = config::enum_name(config::Planner::hdp);
        return grid;
      }
    } catch (const Error&) {  // CP > T, or longer than seq_len_max
    }
  }
  return plan;
}

}  // namespace

Plan plan_hdp(const std::vector<int64_t>& lengths, const PlannerOptions& o, const CostModel& cost) {
  const SequenceWork base(lengths, o, cost);
  const int32_t T = o.trainers;

  // 2. Candidate schedules (see the header): greedy gangs under several
  // widening targets and shelves over regions of several sizes, likeliest
  // first, until one is within 1% of the ideal step time.
  const double ideal = ideal_bound(lengths, o, cost).value();
  std::unique_ptr<Schedule> best;
  auto done = [&] { return best && best->makespan <= ideal * 1.01; };
  auto consider = [&](std::unique_ptr<Schedule> sc) {
    if (!best || sc->makespan < best->makespan * (1 - 1e-3)) best = std::move(sc);
  };
  // With the run's nodes each candidate is scheduled with its rings inside
  // nodes first, then by rank unless the first is already within 1% of the
  // ideal: rank order wins only when faster, so no candidate is slower than
  // in rank order (ties keep the nodes). Returns the better makespan.
  auto run = [&](const SequenceWork& w, int32_t region) {
    auto once = [&](bool by_node) {
      auto sc = std::make_unique<Schedule>(w, by_node);
      schedule(*sc, region);
      const double m = sc->makespan;
      consider(std::move(sc));
      return m;
    };
    if (!cost.places_by_node()) return once(false);
    const double m = once(true);
    return done() ? m : std::min(m, once(false));
  };
  std::vector<std::vector<int32_t>> tried;  // group sizes already scheduled greedily
  // Returns the candidate's makespan (infinity when skipped).
  auto greedy = [&](double factor) {
    if (done()) return double(INFINITY);
    SequenceWork w = base;
    widen(w, factor);
    for (const auto& k : tried)
      if (k == w.k) return double(INFINITY);  // the same groups: the same schedule
    tried.push_back(w.k);
    return run(w, 0);
  };
  // Shelves start from the plain split (k_min = ceil(L / C), no offloading),
  // so that every sequence longer than C is in a shelf even where offloading
  // would let it run whole: offloading only adds candidates.
  PlannerOptions plain_options = o;
  plain_options.offload = false;
  std::optional<SequenceWork> plain;
  try {
    plain.emplace(lengths, o.offload ? plain_options : o, cost);
  } catch (const Error&) {  // without offloading some sequence needs more than T
  }
  double split_work = 0, whole_work = 0;
  int32_t widest = 0;
  for (int32_t i = 0; plain && i < plain->n(); ++i) {
    (plain->k[i] > 1 ? split_work : whole_work) += plain->work(i);
    if (plain->k[i] > 1) widest = std::max(widest, plain->k[i]);
  }
  std::map<int32_t, double> shelf_makespan;
  auto shelves = [&](int32_t region) {
    region = std::clamp(region, widest, T);
    if (auto it = shelf_makespan.find(region); it != shelf_makespan.end()) return it->second;
    const double m = run(*plain, region);
    shelf_makespan[region] = m;
    return m;
  };
  const int32_t share_region =
      widest > 0 ? int32_t(std::ceil(T * split_work / (split_work + whole_work))) : 0;
  greedy(o.widen ? 1.0 : 0.0);
  if (o.widen && widest > 0 && !done()) shelves(share_region);
  greedy(0.0);
  if (o.widen) {
    // Looser, then tighter targets; on large steps each direction stops once
    // it gets worse (a fixed rule, so plans stay deterministic).
    const bool large = int64_t(base.n()) + T > 16384;
    for (const auto& sweep :
         {std::vector<double>{1.1, 1.25, 1.5, 2.0}, std::vector<double>{0.75, 0.5, 0.25, -1.0}}) {
      double last = best ? best->makespan : INFINITY;
      for (double f : sweep) {
        const double m = greedy(f);
        if (large && std::isfinite(m) && m > last * (1 + 1e-3)) break;
        if (std::isfinite(m)) last = m;
      }
    }
    if (widest > 0 && !done()) {
      shelves(T);
      // Golden-section search of the region size: unsplittable sequences may
      // need more trainers than their share of the work says.
      int32_t lo = widest, hi = T;
      for (int it = 0; it < 12 && hi - lo > 2 && !done(); ++it) {
        const int32_t m1 = lo + int32_t(0.382 * (hi - lo));
        const int32_t m2 = lo + int32_t(0.618 * (hi - lo));
        (shelves(m1) <= shelves(m2) ? hi : lo) = (shelves(m1) <= shelves(m2) ? m2 : m1);
      }
    }
  }
  return with_alternatives(micro_batches(*best, lengths, o, cost), ideal, lengths, o, cost);
}

}  // namespace meshloom::plan
