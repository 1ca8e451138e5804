#include "plan/pipeline/pipeline_schedule.hpp"

#include <algorithm>

#include "base/check.hpp"
#include "base/strings.hpp"

namespace meshloom::plan {

std::string to_string(const PipeOp& op) {
  return strf("%c%d", op.backward ? 'B' : 'F', op.micro_batch);
}

PipeSchedule one_f_one_b(int pp, int micro_batches) {
  ML_CHECK(pp >= 1 && micro_batches >= 0, strf("pp %d, %d micro-batches", pp, micro_batches));
  PipeSchedule schedule(pp);
  for (int s = 0; s < pp; ++s) {
    std::vector<PipeOp>& ops = schedule[s];
    const int warm = std::min(pp - s - 1, micro_batches);
    int f = 0, b = 0;
    while (f < warm) ops.push_back({false, f++});
    while (f < micro_batches) {
      ops.push_back({false, f++});
      ops.push_back({true, b++});
    }
    while (b < micro_batches) ops.push_back({true, b++});
  }
  return schedule;
}

namespace {

std::vector<int32_t> order_of(const std::vector<PipeOp>& ops, bool backward) {
  std::vector<int32_t> out;
  for (const PipeOp& op : ops)
    if (op.backward == backward) out.push_back(op.micro_batch);
  return out;
}

}  // namespace

std::string check_message_order(const PipeSchedule& schedule, int micro_batches) {
  const int pp = int(schedule.size());
  for (int s = 0; s < pp; ++s) {
    std::vector<int> f(micro_batches, 0), b(micro_batches, 0);
    for (const PipeOp& op : schedule[s]) {
      if (op.micro_batch < 0 || op.micro_batch >= micro_batches)
        return strf("stage %d runs %s of %d micro-batches", s, to_string(op).c_str(),
                    micro_batches);
      ++(op.backward ? b : f)[op.micro_batch];
    }
    for (int i = 0; i < micro_batches; ++i)
      if (f[i] != 1 || b[i] != 1)
        return strf("stage %d runs F%d %d times and B%d %d times", s, i, f[i], i, b[i]);
  }
  for (int s = 0; s + 1 < pp; ++s) {
    if (order_of(schedule[s], false) != order_of(schedule[s + 1], false))
      return strf("stage %d sends activations in another order than stage %d receives them", s,
                  s + 1);
    if (order_of(schedule[s + 1], true) != order_of(schedule[s], true))
      return strf("stage %d sends gradients in another order than stage %d receives them", s + 1,
                  s);
  }
  return "";
}

PipeCosts pipe_costs(const PipelineModel& model, std::span<const MicroBatchLoad> micro_batches) {
  PipeCosts c;
  const int pp = model.pp();
  c.forward.assign(pp, {});
  c.backward.assign(pp, {});
  for (const MicroBatchLoad& m : micro_batches) {
    for (int s = 0; s < pp; ++s) {
      c.forward[s].push_back(model.forward(s, m));
      c.backward[s].push_back(model.backward(s, m));
    }
    c.transfer.push_back(model.transfer(m));
  }
  return c;
}

double PipeTiming::bubble() const {
  if (busy.empty() || makespan <= 0) return 0;
  double sum = 0;
  for (double b : busy) sum += b;
  return 1.0 - sum / (double(busy.size()) * makespan);
}

namespace {

constexpr double kNotYet = -1;

// Event state of one simulation: when each op of each stage ended.
struct Run {
  const PipeSchedule& schedule;
  const PipeCosts& costs;
  std::vector<std::vector<double>> f_end, b_end;  // [stage][micro-batch], kNotYet
  std::vector<size_t> next;                       // per stage: its next op
  std::vector<double> free;                       // per stage: when it is idle
  PipeTiming timing;

  Run(const PipeSchedule& s, const PipeCosts& c) : schedule(s), costs(c) {
    const int pp = int(s.size()), m = c.micro_batches();
    f_end.assign(pp, std::vector<double>(m, kNotYet));
    b_end = f_end;
    next.assign(pp, 0);
    free.assign(pp, 0.0);
    timing.busy.assign(pp, 0.0);
    timing.ops.resize(pp);
    for (int st = 0; st < pp; ++st) timing.ops[st].resize(s[st].size());
  }
  int pp() const { return int(schedule.size()); }

  // When op can start on stage s, or kNotYet while an input is missing;
  // `waits` names the missing input.
  double ready(int s, const PipeOp& op, std::string* waits) const {
    const int i = op.micro_batch;
    const double msg = costs.transfer[i];
    if (!op.backward) {
      if (s == 0) return 0;
      if (f_end[s - 1][i] == kNotYet) {
        if (waits) *waits = strf("F%d of stage %d", i, s - 1);
        return kNotYet;
      }
      return f_end[s - 1][i] + msg;
    }
    if (f_end[s][i] == kNotYet) {
      if (waits) *waits = strf("its own F%d", i);
      return kNotYet;
    }
    if (s == pp() - 1) return f_end[s][i];
    if (b_end[s + 1][i] == kNotYet) {
      if (waits) *waits = strf("B%d of stage %d", i, s + 1);
      return kNotYet;
    }
    return std::max(f_end[s][i], b_end[s + 1][i] + msg);
  }

  // Runs stage s's ops until one waits; true if any ran.
  bool advance(int s) {
    bool ran = false;
    while (next[s] < schedule[s].size()) {
      const PipeOp& op = schedule[s][next[s]];
      const double at = ready(s, op, nullptr);
      if (at == kNotYet) break;
      std::vector<double>& end = op.backward ? b_end[s] : f_end[s];
      if (end[op.micro_batch] != kNotYet)
        throw Error(strf("pipeline schedule: stage %d runs %s twice", s, to_string(op).c_str()));
      const double len = (op.backward ? costs.backward : costs.forward)[s][op.micro_batch];
      const double start = std::max(free[s], at);
      free[s] = start + len;
      end[op.micro_batch] = free[s];
      timing.ops[s][next[s]] = {start, free[s]};
      timing.busy[s] += len;
      ++next[s];
      ran = true;
    }
    return ran;
  }

  std::string stuck() const {
    std::vector<std::string> parts;
    for (int s = 0; s < pp(); ++s) {
      if (next[s] >= schedule[s].size()) continue;
      std::string waits;
      const PipeOp& op = schedule[s][next[s]];
      ready(s, op, &waits);
      parts.push_back(strf("stage %d at %s waits for %s", s, to_string(op).c_str(), waits.c_str()));
    }
    return join(parts, "; ");
  }
};

void check_shapes(const PipeSchedule& schedule, const PipeCosts& costs) {
  const int pp = int(schedule.size()), m = costs.micro_batches();
  ML_CHECK(costs.pp() == pp && int(costs.backward.size()) == pp,
           strf("costs for %d stages, a schedule of %d", costs.pp(), pp));
  for (int s = 0; s < pp; ++s) {
    ML_CHECK(int(costs.forward[s].size()) == m && int(costs.backward[s].size()) == m,
             strf("stage %d: costs of another number of micro-batches than %d", s, m));
    for (const PipeOp& op : schedule[s])
      if (op.micro_batch < 0 || op.micro_batch >= m)
        throw Error(strf("pipeline schedule: stage %d runs %s, but there are %d micro-batches", s,
                         to_string(op).c_str(), m));
  }
}

}  // namespace

PipeTiming simulate_pipeline(const PipeSchedule& schedule, const PipeCosts& costs) {
  check_shapes(schedule, costs);
  Run run(schedule, costs);
  // Every sweep runs at least one op or ends: at most (all ops) sweeps.
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < run.pp(); ++s) progress = run.advance(s) || progress;
  }
  for (int s = 0; s < run.pp(); ++s)
    if (run.next[s] < schedule[s].size())
      throw Error("pipeline schedule deadlocks: " + run.stuck());
  for (double f : run.free) run.timing.makespan = std::max(run.timing.makespan, f);
  return run.timing;
}

PipeTiming simulate_one_f_one_b(const PipelineModel& model,
                                std::span<const MicroBatchLoad> micro_batches) {
  return simulate_pipeline(one_f_one_b(model.pp(), int(micro_batches.size())),
                           pipe_costs(model, micro_batches));
}

double pipeline_lower_bound(const PipeCosts& costs) {
  const int pp = costs.pp(), m = costs.micro_batches();
  double bound = 0;
  for (int i = 0; i < m; ++i) {
    double chain = 2.0 * (pp - 1) * costs.transfer[i];
    for (int s = 0; s < pp; ++s) chain += costs.forward[s][i] + costs.backward[s][i];
    bound = std::max(bound, chain);
  }
  for (int s = 0; s < pp; ++s) {
    double busy = 0;
    for (int i = 0; i < m; ++i) busy += costs.forward[s][i] + costs.backward[s][i];
    bound = std::max(bound, busy);
  }
  return bound;
}

MicroBatchLoad pipeline_load(const Plan& plan, const MicroBatch& mb, const CostModel& cost) {
  double tokens = 0, l2 = 0;
  int k = 1;
  for (const Piece& pc : plan.pieces_of(mb)) {
    k = plan.group_size(pc.seq);
    const double L = double(plan.lengths[size_t(pc.seq)]);
    tokens += double(plan.slots(pc));
    l2 += L * L / k;
  }
  // Rings between pipelines cross nodes (a pipeline spans tp x pp GPUs).
  const double nonlinear = cost.micro_batch(tokens, l2, k) - cost.micro_batch(tokens, 0, 1);
  MicroBatchLoad m;
  m.tokens = tokens;
  m.attn_l2 = cost.a > 0 ? nonlinear / cost.a : 0;
  return m;
}

std::vector<std::vector<MicroBatchLoad>> plan_loads(const Plan& plan, const CostModel& cost) {
  std::vector<std::vector<MicroBatchLoad>> lists(size_t(plan.trainers));
  for (int32_t t = 0; t < plan.trainers; ++t)
    for (const MicroBatch& mb : plan.micro_batches_of(t))
      lists[size_t(t)].push_back(pipeline_load(plan, mb, cost));
  return lists;
}

}  // namespace meshloom::plan
