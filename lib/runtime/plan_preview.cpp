#include "runtime/plan_preview.hpp"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "base/strings.hpp"
#include "dataplane/data_plane.hpp"
#include "parallel/mesh.hpp"
#include "plan/cost/device_memory.hpp"
#include "plan/cost/host_memory.hpp"
#include "plan/io/summary.hpp"
#include "plan/pipeline/pp_plan.hpp"
#include "plan/planner.hpp"
#include "sources/doc_source.hpp"

namespace meshloom::runtime {

void preview_plans(const config::Config& c, int trainers, int64_t steps,
                   const FirstStepPlans& on_first_step, int trainers_per_node) {
  if (trainers < 1) throw Error("--config needs --trainers T (the trainer count to plan for)");
  std::vector<std::unique_ptr<sources::DocSource>> sources;
  std::vector<int64_t> docs;
  for (size_t i = 0; i < c.data.sources.size(); ++i) {
    sources.push_back(sources::open_doc_source(c, i));
    docs.push_back(sources.back()->docs());
  }
  dataplane::DataPlane plane(c, docs,
                             [&](int s, int64_t d) { return sources[size_t(s)]->length(d); });
  // An HDP rank is a TP group of parallel.tp trainers, or a pipeline of pp
  // of them, as the lead plans it (roles/step_placer.cpp).
  const int tp = int(c.parallel.tp), pp = int(c.parallel.pp), group = tp * pp;
  if (trainers % group != 0)
    throw Error(strf("--trainers %d is not a multiple of parallel.tp x parallel.pp (%d x %d)",
                     trainers, tp, pp));
  const plan::RunCosts costs = plan::run_costs(c);
  plan::CostModel cost = costs.hdp_rank;
  if (trainers_per_node > 0) {
    // Host names as the run would see them, so that the nodes are the lead's.
    std::vector<std::string> hosts;
    for (int t = 0; t < trainers; ++t) hosts.push_back(strf("node%d", t / trainers_per_node));
    const parallel::TrainerNodes nodes =
        parallel::trainer_nodes(parallel::trainer_mesh(c, trainers), 0, hosts);
    cost.set_nodes(nodes.hdp_rank_node);
    std::printf("%s\n", nodes.describe().c_str());
  }
  const plan::PlannerOptions o =
      plan::options_from_config(c.plan, trainers / group, c.data.seq_len);
  if (group > 1)
    std::printf("%d trainers in groups of tp %d x pp %d: planning over %d HDP ranks\n", trainers,
                tp, pp, trainers / group);
  if (c.run.backend == config::Backend::cpu) {
    const plan::HostMemory m = plan::host_memory_for_run(c, trainers);
    std::printf(
        "host memory per trainer (run.backend: cpu, tp %d%s%s%s): about %s for micro-batches of "
        "up to %lld tokens\n",
        tp, m.input.sequence_parallel && tp > 1 ? ", sequence parallel" : "",
        c.optim.zero1 ? ", ZeRO-1" : "",
        pp > 1 ? strf(", pp %d: the largest stage", pp).c_str() : "", m.describe(6).c_str(),
        (long long)m.input.tokens);
  }
  if (c.run.backend == config::Backend::cuda) {
    // run.gpu_comm: auto takes NCCL where every trainer has a GPU of its own.
    const bool nccl = c.run.gpu_comm != config::GpuComm::mpi;
    const plan::DeviceMemory m = plan::device_memory_for_run(c, trainers, nccl);
    std::printf(
        "device memory per trainer (run.backend: cuda, rings over %s%s): about %s for "
        "micro-batches of up to %lld tokens\n",
        nccl ? "NCCL" : "MPI", pp > 1 ? strf(", pp %d: the largest stage", pp).c_str() : "",
        m.describe(3).c_str(), (long long)m.input.tokens);
  }
  const bool grid = c.plan.planner == config::Planner::static_grid;
  const config::Planner other = grid ? config::Planner::hdp : config::Planner::static_grid;
  // With pipelines a plan takes its slowest pipeline's 1F1B makespan (as
  // metrics.jsonl's `predicted`), and the comparison is the other
  // plan.balance on the same batch.
  const bool pipes = pp > 1;
  config::PlanConfig other_balance = c.plan;
  other_balance.balance =
      c.plan.balance == config::Balance::pp ? config::Balance::dp : config::Balance::pp;
  auto step_time = [&](const plan::Plan& plan) {
    return pipes ? plan::slowest_pipeline(plan, costs.pipeline, cost)
                 : plan::plan_stats(plan).makespan;
  };
  if (pipes)
    std::printf(
        "predicted: the slowest pipeline's 1F1B makespan, rings waiting for their members; against "
        "plan.balance: %s\n",
        config::enum_name(other_balance.balance));
  const std::string versus = pipes ? strf("balance %s", config::enum_name(other_balance.balance))
                                   : std::string(config::enum_name(other));
  std::printf("%5s %8s %6s %6s %9s %10s %10s %10s %11s %10s %10s\n", "step", "samples", "split",
              "max k", "micro", "predicted", "imbalance", "ring/step", "plan ms", versus.c_str(),
              "speedup");
  int64_t fallbacks = 0;
  std::string first_rings;
  for (int64_t step = 0; step < steps; ++step) {
    dataplane::StepManifest m = plane.next();
    std::vector<int64_t> lengths;
    for (const auto& p : m.samples) lengths.push_back(p.length);
    const plan::Plan p =
        plan::plan_step({c.plan.planner, c.plan.balance, &costs.pipeline}, lengths, o, cost);
    const std::string err = p.validate();
    if (!err.empty()) throw Error(strf("step %lld: %s", (long long)step, err.c_str()));
    const plan::Plan q = plan::plan_step({other}, lengths, o, cost);
    const plan::Plan other_step =
        pipes ? plan::plan_step({other_balance.planner, other_balance.balance, &costs.pipeline},
                                lengths, o, cost)
              : plan::Plan{};
    const plan::Plan& against = pipes ? other_step : q;
    const plan::PlanStats st = plan::plan_stats(p);
    const double mine = step_time(p), theirs = step_time(against);
    std::printf("%5lld %8zu %6lld %6d %4d-%-4d %10s %10.3f %10s %11.2f %10s %9.2fx%s\n",
                (long long)step, lengths.size(), (long long)st.split_sequences, st.max_group,
                st.min_micro_batches, st.max_micro_batches, human_seconds(mine).c_str(),
                st.imbalance, human_bytes(st.comm_bytes).c_str(), p.planning_seconds * 1e3,
                human_seconds(theirs).c_str(), theirs / std::max(mine, 1e-12),
                p.static_fallback() ? "  static fallback"
                : pipes && c.plan.balance == config::Balance::pp && p.planner != "pp-balance"
                    ? "  hdp's plan"
                    : "");
    fallbacks += p.static_fallback();
    if (step == 0 && on_first_step) on_first_step(grid ? q : p, grid ? p : q);
    if (step == 0 && trainers_per_node > 0)
      first_rings = plan::ring_table(p, cost, plan::kRingTableRows);
  }
  if (!first_rings.empty()) std::printf("rings of step 0:\n%s", first_rings.c_str());
  if (o.static_fallback && c.plan.planner == config::Planner::hdp)
    std::printf("static fallback (plan.static_fallback): %lld of %lld steps\n",
                (long long)fallbacks, (long long)steps);
}

}  // namespace meshloom::runtime
