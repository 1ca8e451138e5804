#include "plan/io/summary.hpp"

#include <algorithm>
#include <vector>

#include "base/strings.hpp"
#include "plan/cp_algorithm.hpp"
#include "plan/io/lengths.hpp"
#include "plan/io/plan_io.hpp"

namespace meshloom::plan {

std::string plan_summary(const Plan& p, double ideal) {
  const PlanStats st = plan_stats(p);
  std::string out;
  int64_t tokens = 0;
  for (int64_t L : p.lengths) tokens += L;
  out += strf("planner %s: %d sequences, %s tokens on %d trainers, capacity %s", p.planner.c_str(),
              p.sequences(), format_tokens(tokens).c_str(), p.trainers,
              format_tokens(p.capacity).c_str());
  if (p.static_cp > 0) out += strf(" (grid CP %d x DP %d)", p.static_cp, p.trainers / p.static_cp);
  if (p.static_fallback()) out += " [static fallback: the grid's plan is faster]";
  out += strf("\n  predicted step %s, imbalance %.3f (max/mean), step / ideal %.3f, idle %.1f%%\n",
              human_seconds(st.makespan).c_str(), st.imbalance,
              ideal > 0 ? st.makespan / ideal : 1.0, 100 * st.idle_fraction);
  out += strf(
      "  %lld split sequences (largest group %d), ring traffic %s/step, "
      "micro-batches per trainer %d-%d\n",
      (long long)st.split_sequences, st.max_group,
      human_bytes(st.comm_bytes - st.a2a_bytes).c_str(), st.min_micro_batches,
      st.max_micro_batches);
  if (st.split_sequences > 0)
    out += strf("  CP algorithms: %s; all-to-all traffic %s/step (heads of a TP rank: %d, %d KV)\n",
                format_cp_counts(cp_counts(p)).c_str(), human_bytes(st.a2a_bytes).c_str(),
                p.heads.heads, p.heads.kv_heads);
  out += strf("  planned in %.2f ms; binary plan %s\n", p.planning_seconds * 1e3,
              human_bytes(double(serialize(p).size())).c_str());
  return out;
}

std::string ring_table(const Plan& p, const CostModel& cost, size_t max_rows) {
  struct Ring {
    int32_t seq;
    const MicroBatch* mb;  // member 0's
  };
  std::vector<Ring> rings;
  for (int32_t s = 0; s < p.sequences(); ++s) {
    if (p.group_size(s) < 2) continue;
    for (const MicroBatch& mb : p.micro_batches_of(p.group(s)[0])) {
      const auto pcs = p.pieces_of(mb);
      if (std::any_of(pcs.begin(), pcs.end(), [s](const Piece& pc) { return pc.seq == s; })) {
        rings.push_back({s, &mb});
        break;
      }
    }
  }
  if (rings.empty()) return "";
  std::stable_sort(rings.begin(), rings.end(),
                   [](const Ring& x, const Ring& y) { return x.mb->start < y.mb->start; });
  const bool known = cost.knows_nodes();
  std::string out = strf("  %6s %9s %5s %-12s %-20s %5s %7s %10s %10s\n", "seq", "tokens", "k",
                         "attention", "trainers", "nodes", "crosses", "start", "time");
  for (size_t j = 0; j < rings.size() && j < max_rows; ++j) {
    const int32_t s = rings[j].seq;
    const auto group = p.group(s);
    std::vector<int32_t> sorted(group.begin(), group.end());
    std::sort(sorted.begin(), sorted.end());
    const int32_t nodes = cost.nodes_spanned(group);
    std::string who = index_runs(sorted);
    if (who.size() > 20) who = who.substr(0, 17) + "...";
    const MicroBatch& mb = *rings[j].mb;
    out +=
        strf("  %6d %9s %5d %-12s %-20s %5s %7s %10s %10s\n", s,
             format_tokens(p.lengths[size_t(s)]).c_str(), int(group.size()),
             cp_algo_name(p.cp_algo(s), int(group.size())).c_str(), who.c_str(),
             known ? strf("%d", nodes).c_str() : "?", known ? strf("%d", nodes - 1).c_str() : "?",
             human_seconds(mb.start).c_str(), human_seconds(mb.end - mb.start).c_str());
  }
  if (rings.size() > max_rows) out += strf("  ... %zu more rings\n", rings.size() - max_rows);
  out += "  " + format_ring_nodes(ring_nodes(p, cost)) + "\n";
  return out;
}

RingNodes ring_nodes(const Plan& p, const CostModel& cost) {
  RingNodes r;
  r.known = cost.knows_nodes();
  for (int32_t s = 0; s < p.sequences(); ++s) {
    if (p.group_size(s) < 2) continue;
    ++r.rings;
    if (!r.known) continue;
    const int32_t nodes = cost.nodes_spanned(p.group(s));
    ++(nodes == 1 ? r.inside : r.crossing);
    r.boundaries += nodes - 1;
  }
  return r;
}

std::string format_ring_nodes(const RingNodes& r) {
  if (!r.known) return strf("%lld rings; no node layout known", (long long)r.rings);
  return strf("%lld rings: %lld inside one node, %lld across nodes; node boundaries crossed: %lld",
              (long long)r.rings, (long long)r.inside, (long long)r.crossing,
              (long long)r.boundaries);
}

}  // namespace meshloom::plan
