#include "plan/cp_algorithm.hpp"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "base/check.hpp"
#include "base/strings.hpp"

namespace meshloom::plan {

std::vector<int> ulysses_degrees(int k, const HeadShape& heads) {
  std::vector<int> out;
  for (int u = 1; u <= k; ++u)
    if (k % u == 0 && ulysses_fits(heads, u)) out.push_back(u);
  return out;
}

int forced_ulysses_degree(config::CpAlgorithm setting, std::span<const int32_t> ranks,
                          const CostModel& cost) {
  const int k = int(ranks.size());
  const std::vector<int> degrees = ulysses_degrees(k, cost.heads);
  switch (setting) {
    case config::CpAlgorithm::ring:
      return 1;
    case config::CpAlgorithm::ulysses:
      return degrees.back();
    case config::CpAlgorithm::hybrid:
      for (auto u = degrees.rbegin(); u != degrees.rend(); ++u)
        if (*u < k && (!cost.knows_nodes() || cost.cp_links(ranks, *u).a2a_intra)) return *u;
      return 1;
    case config::CpAlgorithm::automatic:
      break;
  }
  ML_CHECK(false, "forced_ulysses_degree: auto is chosen by cost");
  return 1;
}

namespace {

// auto: the degree whose slowest member (micro-batches `mbs`) is fastest.
int cheapest_degree(const Plan& plan, const CostModel& cost, int32_t seq,
                    const std::vector<int32_t>& mbs) {
  const auto ranks = plan.group(seq);
  int best_u = 1;
  double best = 0;
  for (int u : ulysses_degrees(int(ranks.size()), cost.heads)) {
    const CpLinks links = cost.cp_links(ranks, u);
    double slowest = 0;
    for (int32_t i : mbs)
      slowest = std::max(slowest, plan.member_seconds(plan.micro_batches[i], cost, u, links));
    if (u == 1 || slowest < best) {
      best = slowest;
      best_u = u;
    }
  }
  return best_u;
}

// Every member's micro-batch of each ring, by the ring's first sequence.
std::vector<std::vector<int32_t>> ring_micro_batches(const Plan& plan) {
  std::vector<std::vector<int32_t>> out(size_t(plan.sequences()));
  for (size_t i = 0; i < plan.micro_batches.size(); ++i) {
    const int32_t s = plan.pieces[plan.micro_batches[i].piece_begin].seq;
    if (plan.group_size(s) > 1) out[size_t(s)].push_back(int32_t(i));
  }
  return out;
}

}  // namespace

void choose_cp_algorithms(Plan& plan, const CostModel& cost, config::CpAlgorithm setting) {
  const bool was_ring = plan.cp.empty();
  plan.heads = cost.heads;
  plan.cp.clear();
  if (setting == config::CpAlgorithm::ring) {
    if (!was_ring) plan.retime(cost);
    return;
  }
  std::vector<CpAlgo> cp(size_t(plan.sequences()));
  bool any = false;
  const std::vector<std::vector<int32_t>> rings = ring_micro_batches(plan);
  for (int32_t s = 0; s < plan.sequences(); ++s) {
    const std::vector<int32_t>& mbs = rings[size_t(s)];
    if (mbs.empty()) continue;
    const int k = plan.group_size(s);
    const int u = setting == config::CpAlgorithm::automatic
                      ? cheapest_degree(plan, cost, s, mbs)
                      : forced_ulysses_degree(setting, plan.group(s), cost);
    if (u == 1) continue;
    any = true;
    // Every sequence packed with s: the ring's micro-batches hold the same ones.
    for (const Piece& p : plan.pieces_of(plan.micro_batches[size_t(mbs.front())]))
      cp[size_t(p.seq)] = cp_algo_of(k, u);
  }
  if (any || !was_ring) {
    if (any) plan.cp = std::move(cp);
    plan.retime(cost);
  }
}

double least_cp_seconds(const CostModel& cost, double tokens, double attn_l2, int k,
                        config::CpAlgorithm setting) {
  const int per_node = cost.largest_node();
  const bool ring_intra = per_node > 0 && k <= per_node;
  double best = cost.micro_batch(tokens, attn_l2, k, ring_intra) - cost.g;
  if (setting == config::CpAlgorithm::ring || k <= 1) return best;
  for (int u : ulysses_degrees(k, cost.heads)) {
    const CpLinks links{per_node > 0 && u <= per_node, ring_intra};
    best = std::min(best, cost.cp_micro_batch(tokens, attn_l2, k, u, links) - cost.g);
  }
  return best;
}

namespace {

std::tuple<int, int32_t, int32_t> count_key(const CpCount& c) { return {int(c.kind), c.u, c.r}; }

}  // namespace

std::vector<CpCount> cp_counts(const Plan& plan) {
  std::vector<CpCount> out;
  for (int32_t s = 0; s < plan.sequences(); ++s) {
    const int k = plan.group_size(s);
    if (k <= 1) continue;
    const CpAlgo a = plan.cp_algo(s);
    CpCount c;
    c.kind = a.kind;
    c.u = a.kind == config::CpAlgorithm::hybrid ? a.u : 0;
    c.r = a.kind == config::CpAlgorithm::hybrid ? k / a.u : 0;
    c.sequences = 1;
    add_cp_counts(out, {c}, 1.0);
  }
  return out;
}

void add_cp_counts(std::vector<CpCount>& into, const std::vector<CpCount>& more, double weight) {
  for (const CpCount& c : more) {
    auto at = std::lower_bound(into.begin(), into.end(), c, [](const CpCount& x, const CpCount& y) {
      return count_key(x) < count_key(y);
    });
    if (at == into.end() || count_key(*at) != count_key(c))
      at = into.insert(at, {c.kind, c.u, c.r, 0});
    at->sequences += weight * c.sequences;
  }
}

std::string format_cp_counts(const std::vector<CpCount>& counts) {
  std::vector<std::string> parts;
  for (const CpCount& c : counts) {
    const std::string name = cp_algo_name(CpAlgo{c.kind, c.u}, c.u * c.r);
    parts.push_back(name + " " + shortest_text(std::round(c.sequences * 10) / 10));
  }
  return parts.empty() ? "none" : join(parts, ", ");
}

}  // namespace meshloom::plan
