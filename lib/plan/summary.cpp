#include "plan/summary.hpp"

#include "base/strings.hpp"
#include "plan/cp_algorithm.hpp"
#include "plan/lengths.hpp"
#include "plan/plan_io.hpp"

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

}  // namespace meshloom::plan
