#include "roles/step_placer.hpp"

#include <algorithm>
#include <set>

#include "base/check.hpp"
#include "base/log.hpp"
#include "parallel/mesh.hpp"
#include "plan/cache_relabel.hpp"
#include "plan/cp_algorithm.hpp"
#include "plan/io/summary.hpp"
#include "plan/pipeline/pipeline_schedule.hpp"
#include "plan/pipeline/pipeline_slots.hpp"
#include "plan/pipeline/pp_plan.hpp"

namespace meshloom::roles {

namespace {

// The step's CP groups (group size > 1) and the Ulysses subgroups of its
// hybrid ones (u consecutive members of the sorted set, as the group's
// communicator ranks them), each member set once, in plan order.
std::vector<std::vector<int32_t>> step_groups(const plan::Plan& plan) {
  std::vector<std::vector<int32_t>> groups;
  std::set<std::vector<int32_t>> seen;
  auto add = [&](std::vector<int32_t> members) {
    std::vector<int32_t> key = members;
    std::sort(key.begin(), key.end());
    if (seen.insert(key).second) groups.push_back(std::move(members));
  };
  for (int32_t seq = 0; seq < plan.sequences(); ++seq) {
    if (plan.group_size(seq) < 2) continue;
    const auto g = plan.group(seq);
    add({g.begin(), g.end()});
    const int32_t u = plan.cp_algo(seq).u;
    if (u <= 1 || u >= int32_t(g.size())) continue;
    std::vector<int32_t> sorted(g.begin(), g.end());
    std::sort(sorted.begin(), sorted.end());
    for (size_t j = 0; j < sorted.size(); j += size_t(u))
      add({sorted.begin() + long(j), sorted.begin() + long(j) + u});
  }
  return groups;
}

}  // namespace

StepPlacer::StepPlacer(const parallel::World& w) : w_(w) {
  // An HDP rank is a TP group, or a pipeline of them (plan/pipeline/pipeline.hpp).
  const plan::RunCosts costs = plan::run_costs(w.config);
  cost_ = costs.hdp_rank;
  pipe_model_ = costs.pipeline;
  // The HDP ranks' nodes, from the trainers' host names: rings inside a node
  // use plan.intra_bandwidth and the planner keeps rings inside nodes. One
  // host: one node, every ring on plan.intra_bandwidth (plan.bandwidth unless set).
  const parallel::TrainerNodes nodes =
      parallel::trainer_nodes(w.mesh, w.layout.first_rank(parallel::Role::trainer), w.hosts);
  cost_.set_nodes(nodes.hdp_rank_node);  // (the job logs the nodes: parallel/nodes.hpp)
  if (!costs.calibration.empty())
    LOG_INFO("cost model calibrated from %s: %s", w.config.plan.calibration.c_str(),
             costs.calibration.c_str());
}

// Placement: the configured planner (HDP by default) turns the step's sample
// lengths into a plan; each trainer's micro-batches become segment lists. A
// CP micro-batch carries its ring (trainer indices in order) and this
// member's place; every member holds its zigzag chunks (front, then back).
void StepPlacer::place(wire::StepWork& work, const std::vector<int64_t>& lengths) {
  const int T = w_.mesh.hdp_ranks();  // the planner's "trainers" are HDP ranks
  plan::PlannerOptions options =
      plan::options_from_config(w_.config.plan, T, w_.config.data.seq_len);
  last_plan_ = plan::plan_step({w_.config.plan.planner, w_.config.plan.balance, &pipe_model_},
                               lengths, options, cost_);
  prefer_cached_groups();
  // Which CP attention the split sequences got, once, when it is not all rings.
  if (!cp_logged_ && w_.config.plan.cp_algorithm != config::CpAlgorithm::ring &&
      plan::plan_stats(last_plan_).split_sequences > 0) {
    LOG_INFO("step %lld: CP attention of the split sequences (plan.cp_algorithm %s): %s",
             (long long)work.step, config::enum_name(w_.config.plan.cp_algorithm),
             plan::format_cp_counts(plan::cp_counts(last_plan_)).c_str());
    cp_logged_ = true;
  }
  // Where the rings went, once, on several nodes (the planner keeps them inside nodes).
  if (!rings_logged_ && cost_.places_by_node()) {
    const plan::RingNodes rings = plan::ring_nodes(last_plan_, cost_);
    if (rings.rings > 0) {
      LOG_INFO("step %lld: %s", (long long)work.step, plan::format_ring_nodes(rings).c_str());
      rings_logged_ = true;
    }
  }
  ML_DCHECK(last_plan_.validate().empty(), last_plan_.validate());
  work.capacity = last_plan_.capacity;
  // Pipelines run 1F1B over slots, a ring at the same slot in each member.
  plan::PipelineSlots slots;
  if (w_.mesh.pp > 1) slots = plan::pipeline_slots(last_plan_);
  work.groups = step_groups(last_plan_);
  group_history_.prepare(comm::distinct_member_sets(work.groups));  // as every trainer's cache does
  work.trainers.resize(size_t(T));
  for (int t = 0; t < T; ++t) {
    wire::TrainerWork& tw = work.trainers[size_t(t)];
    tw.trainer = t;
    const size_t count = last_plan_.micro_batches_of(t).size();
    for (size_t i = 0; i < count; ++i) {
      wire::MicroBatchWork mbw;
      if (w_.mesh.pp > 1) mbw.slot = slots.slot[size_t(last_plan_.trainer_begin[size_t(t)]) + i];
      for (const plan::PieceLayout& pl : last_plan_.layout(t, i)) {
        for (const plan::Span& span : {pl.chunks.front, pl.chunks.back})
          if (span.size() > 0) mbw.segments.push_back({pl.seq, span.begin, span.size()});
        mbw.offload = std::max(mbw.offload, last_plan_.offload_ratio(pl.seq));
        if (pl.k > 1) {
          auto g = last_plan_.group(pl.seq);
          mbw.group.assign(g.begin(), g.end());
          mbw.member = pl.member;
          mbw.ulysses = last_plan_.cp_algo(pl.seq).u;
        }
      }
      tw.micro.push_back(std::move(mbw));
    }
  }
}

// Relabels the plan's HDP ranks, within nodes, so that its CP groups fall
// on member sets the trainers have cached (free: plan/cache_relabel.hpp).
void StepPlacer::prefer_cached_groups() {
  std::vector<comm::MemberSet> cached = group_history_.sets();
  if (cached.empty()) return;
  std::reverse(cached.begin(), cached.end());  // most recent first
  const std::vector<int32_t> new_rank = plan::cache_relabeling(last_plan_, cached, cost_.nodes());
  for (size_t r = 0; r < new_rank.size(); ++r)
    if (new_rank[r] != int32_t(r)) {
      last_plan_ = plan::relabel_ranks(last_plan_, new_rank);
      return;
    }
}

std::vector<double> StepPlacer::predicted_times() const {
  const bool pipelines = w_.mesh.pp > 1;
  std::vector<double> per_rank;
  if (pipelines) per_rank = plan::pipeline_times(last_plan_, pipe_model_, cost_);
  std::vector<double> predicted;
  for (int t = 0; t < w_.layout.trainers; ++t) {
    const int rank = w_.mesh.hdp_rank_of(t);
    predicted.push_back(pipelines ? per_rank[size_t(rank)] : last_plan_.trainer_time(rank));
  }
  return predicted;
}

void StepPlacer::restore_group_sets(const std::vector<std::vector<int32_t>>& sets) {
  // The cache replay, least recent first; sets of ranks this run lacks go.
  for (const auto& set : sets)
    if (!set.empty() && set.back() < w_.mesh.hdp_ranks()) group_history_.prepare({set});
}

}  // namespace meshloom::roles
