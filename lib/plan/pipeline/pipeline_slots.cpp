#include "plan/pipeline/pipeline_slots.hpp"

#include <algorithm>
#include <deque>

#include "base/check.hpp"
#include "base/strings.hpp"

namespace meshloom::plan {

namespace {

// The ring a micro-batch belongs to: its first sequence (validate() makes it
// the same on every member), or -1 for a whole (k = 1) micro-batch.
int32_t ring_of(const Plan& p, int32_t micro_batch) {
  const int32_t seq = p.pieces[p.micro_batches[micro_batch].piece_begin].seq;
  return p.group_size(seq) > 1 ? seq : -1;
}

int32_t list_size(const Plan& p, int32_t t) { return p.trainer_begin[t + 1] - p.trainer_begin[t]; }

}  // namespace

PipelineSlots pipeline_slots(const Plan& plan) {
  const int32_t T = plan.trainers;
  PipelineSlots out;
  out.slot.assign(plan.micro_batches.size(), -1);
  out.slots.assign(size_t(T), 0);  // the next free slot while walking; S at the end
  std::vector<int32_t> pos(size_t(T), 0), arrived(size_t(plan.sequences()), 0);
  std::vector<int32_t> ring_slot(size_t(plan.sequences()), 0);
  std::vector<int32_t> queue;  // popped from the back: trainer 0 first
  for (int32_t t = T - 1; t >= 0; --t) queue.push_back(t);
  auto at = [&](int32_t t) { return plan.trainer_begin[t] + pos[t]; };
  // Each trainer walks its list until a ring's other members are not all
  // there; the last member to arrive places the ring and wakes the others.
  while (!queue.empty()) {
    const int32_t t = queue.back();
    queue.pop_back();
    while (pos[t] < list_size(plan, t)) {
      const int32_t ring = ring_of(plan, at(t));
      if (ring < 0) {
        out.slot[size_t(at(t))] = out.slots[size_t(t)]++;
        ++pos[t];
        continue;
      }
      ring_slot[size_t(ring)] = std::max(ring_slot[size_t(ring)], out.slots[size_t(t)]);
      if (++arrived[size_t(ring)] < plan.group_size(ring)) break;
      for (int32_t m : plan.group(ring)) {
        if (pos[m] >= list_size(plan, m) || ring_of(plan, at(m)) != ring)
          throw Error(
              strf("pipeline slots: trainer %d is counted at the ring of sequence %d but "
                   "is not there (an invalid plan)",
                   m, ring));
        out.slot[size_t(at(m))] = ring_slot[size_t(ring)];
        out.slots[size_t(m)] = ring_slot[size_t(ring)] + 1;
        ++pos[m];
        if (m != t) queue.push_back(m);
      }
    }
  }
  for (int32_t t = 0; t < T; ++t)
    if (pos[t] < list_size(plan, t))
      throw Error(
          strf("pipeline slots: the plan's ring order deadlocks; trainer %d waits at its "
               "micro-batch %d (validate() names the problem)",
               t, pos[t]));
  return out;
}

PipeSchedule one_f_one_b_slots(int pp, std::span<const int32_t> slots) {
  for (size_t i = 0; i < slots.size(); ++i)
    ML_CHECK(slots[i] >= 0 && (i == 0 || slots[i] > slots[i - 1]),
             strf("slot %d at %zu: slots must increase from 0", slots[i], i));
  const int32_t S = slots.empty() ? 0 : slots.back() + 1;
  std::vector<int32_t> index(size_t(S), -1);  // slot -> index in the list
  for (size_t i = 0; i < slots.size(); ++i) index[size_t(slots[i])] = int32_t(i);
  PipeSchedule schedule = one_f_one_b(pp, S);
  for (std::vector<PipeOp>& ops : schedule) {
    std::erase_if(ops, [&](const PipeOp& op) { return index[size_t(op.micro_batch)] < 0; });
    for (PipeOp& op : ops) op.micro_batch = index[size_t(op.micro_batch)];
  }
  return schedule;
}

PipeSchedule pipeline_schedule(const Plan& plan, const PipelineSlots& slots, int32_t trainer,
                               int pp) {
  ML_CHECK(
      trainer >= 0 && trainer < plan.trainers && slots.slot.size() == plan.micro_batches.size(),
      strf("trainer %d of %d, slots of another plan", trainer, plan.trainers));
  const auto begin = slots.slot.begin() + plan.trainer_begin[trainer];
  return one_f_one_b_slots(pp, std::span(begin, size_t(list_size(plan, trainer))));
}

namespace {

enum class Input { ready, missing, wrong };

constexpr double kNotYet = -1;

// A message in a channel: its micro-batch and when it arrives.
struct Message {
  int32_t micro_batch = 0;
  double at = 0;
};

// The state of simulate_pipelines and pipeline_timings: where each
// (pipeline, stage) is, when it is free, and the messages in flight.
// Micro-batches are indices into their pipeline's list. Without costs every
// op takes no time.
struct Pipelines {
  const Plan& plan;
  std::span<const PipeSchedule> schedules;
  std::span<const PipeCosts> costs;  // per pipeline, or empty
  int pp = 0;
  std::vector<std::vector<size_t>> next;                // [t][s]: next op
  std::vector<std::vector<std::deque<Message>>> acts;   // [t][s]: from s - 1
  std::vector<std::vector<std::deque<Message>>> grads;  // [t][s]: from s + 1
  std::vector<std::vector<std::vector<double>>> f_end;  // [t][s][i]: kNotYet
  std::vector<std::vector<double>> free;                // [t][s]
  std::vector<PipeTiming> timing;                       // per pipeline
  std::string error;

  Pipelines(const Plan& p, std::span<const PipeSchedule> sch, std::span<const PipeCosts> c,
            int stages)
      : plan(p), schedules(sch), costs(c), pp(stages) {
    const size_t T = size_t(p.trainers);
    next.assign(T, std::vector<size_t>(size_t(pp), 0));
    acts.assign(T, std::vector<std::deque<Message>>(size_t(pp)));
    grads = acts;
    free.assign(T, std::vector<double>(size_t(pp), 0.0));
    f_end.resize(T);
    timing.resize(T);
    for (size_t t = 0; t < T; ++t) {
      f_end[t].assign(size_t(pp), std::vector<double>(size_t(list_size(p, int32_t(t))), kNotYet));
      timing[t].busy.assign(size_t(pp), 0.0);
      timing[t].ops.resize(size_t(pp));
      for (int s = 0; s < pp; ++s) timing[t].ops[size_t(s)].resize(sch[t][size_t(s)].size());
    }
  }

  const PipeOp* next_op(int32_t t, int s) const {
    const std::vector<PipeOp>& ops = schedules[size_t(t)][size_t(s)];
    const size_t i = next[size_t(t)][size_t(s)];
    return i < ops.size() ? &ops[i] : nullptr;
  }
  int32_t ring(int32_t t, const PipeOp& op) const {
    return ring_of(plan, plan.trainer_begin[t] + op.micro_batch);
  }
  std::string name(int32_t t, int s, const PipeOp& op) const {
    const int32_t r = ring(t, op);
    return strf("pipeline %d stage %d at %s%s", t, s, to_string(op).c_str(),
                r < 0 ? "" : strf(" (ring of sequence %d)", r).c_str());
  }
  double seconds(int32_t t, int s, const PipeOp& op) const {
    if (costs.empty()) return 0;
    const PipeCosts& c = costs[size_t(t)];
    return (op.backward ? c.backward : c.forward)[size_t(s)][size_t(op.micro_batch)];
  }

  // Whether op's input (its activation, or its gradient and own forward) is
  // there; if so, `at` is when the op could start on an idle stage.
  Input input(int32_t t, int s, const PipeOp& op, double* at = nullptr) {
    const int32_t i = op.micro_batch;
    const double own = f_end[size_t(t)][size_t(s)][size_t(i)];
    if (op.backward && own == kNotYet) {
      error = name(t, s, op) + ": its forward has not run";
      return Input::wrong;
    }
    double ready = op.backward ? own : 0.0;
    const bool first = op.backward ? s == pp - 1 : s == 0;
    if (!first) {
      const std::deque<Message>& q = (op.backward ? grads : acts)[size_t(t)][size_t(s)];
      if (q.empty()) return Input::missing;
      if (q.front().micro_batch != i) {
        error =
            name(t, s, op) + strf(": the first %s in its channel is for micro-batch %d",
                                  op.backward ? "gradient" : "activation", q.front().micro_batch);
        return Input::wrong;
      }
      ready = std::max(ready, q.front().at);
    }
    if (at) *at = std::max(ready, free[size_t(t)][size_t(s)]);
    return Input::ready;
  }

  // Runs (t, s)'s next op from `start` for `len` seconds.
  void run(int32_t t, int s, double start, double len) {
    const PipeOp op = *next_op(t, s);
    auto& here = (op.backward ? grads : acts)[size_t(t)];
    if (op.backward ? s < pp - 1 : s > 0) here[size_t(s)].pop_front();
    const double end = start + len;
    if (!op.backward) f_end[size_t(t)][size_t(s)][size_t(op.micro_batch)] = end;
    const int to = op.backward ? s - 1 : s + 1;
    const double transfer = costs.empty() ? 0.0 : costs[size_t(t)].transfer[size_t(op.micro_batch)];
    if (to >= 0 && to < pp) here[size_t(to)].push_back({op.micro_batch, end + transfer});
    PipeTiming& tm = timing[size_t(t)];
    tm.ops[size_t(s)][next[size_t(t)][size_t(s)]] = {start, end};
    tm.busy[size_t(s)] += len;
    free[size_t(t)][size_t(s)] = end;
    ++next[size_t(t)][size_t(s)];
  }

  // Runs the next op of (t, s), with the rest of its ring; false when it
  // waits. A ring starts when its last member can and takes its slowest
  // member's time on all (a collective).
  bool step(int32_t t, int s) {
    const PipeOp* op = next_op(t, s);
    double start = 0;
    if (!op || input(t, s, *op, &start) != Input::ready) return false;
    const int32_t r = ring(t, *op);
    if (r < 0) {
      run(t, s, start, seconds(t, s, *op));
      return true;
    }
    double len = 0;
    for (int32_t m : plan.group(r)) {
      const PipeOp* mine = next_op(m, s);
      if (!mine || mine->backward != op->backward || ring(m, *mine) != r) return false;
      double at = 0;
      if (input(m, s, *mine, &at) != Input::ready) return false;
      start = std::max(start, at);
      len = std::max(len, seconds(m, s, *mine));
    }
    for (int32_t m : plan.group(r)) run(m, s, start, len);
    return true;
  }

  // What (t, s) waits for, when it is stuck.
  std::string waits(int32_t t, int s) {
    const PipeOp& op = *next_op(t, s);
    if (input(t, s, op) == Input::missing)
      return strf("its %s", op.backward ? "gradient" : "activation");
    const int32_t r = ring(t, op);
    ML_CHECK(r >= 0, name(t, s, op) + " is stuck with its input there");
    for (int32_t m : plan.group(r)) {
      const PipeOp* mine = next_op(m, s);
      if (m != t && (!mine || mine->backward != op.backward || ring(m, *mine) != r))
        return strf("pipeline %d, at %s", m, mine ? to_string(*mine).c_str() : "its end");
    }
    return "a ring member's input";
  }

  std::string stuck() {
    std::vector<std::string> parts;
    for (int32_t t = 0; t < plan.trainers; ++t)
      for (int s = 0; s < pp; ++s)
        if (next_op(t, s) && parts.size() < 6)
          parts.push_back(name(t, s, *next_op(t, s)) + " waits for " + waits(t, s));
    return parts.empty() ? "" : "pipelines deadlock: " + join(parts, "; ");
  }

  // Runs every op that can run; "" when all ran, else what went wrong.
  std::string run_all() {
    // Every sweep runs at least one op or ends: at most (all ops) sweeps.
    for (bool progress = true; progress && error.empty();) {
      progress = false;
      for (int32_t t = 0; t < plan.trainers; ++t)
        for (int s = 0; s < pp; ++s)
          while (error.empty() && step(t, s)) progress = true;
    }
    if (!error.empty()) return error;
    for (PipeTiming& tm : timing)
      for (const std::vector<OpTime>& ops : tm.ops)
        if (!ops.empty()) tm.makespan = std::max(tm.makespan, ops.back().end);
    return stuck();
  }
};

std::string check_shapes(const Plan& plan, std::span<const PipeSchedule> schedules) {
  if (int32_t(schedules.size()) != plan.trainers)
    return strf("%zu schedules for %d pipelines", schedules.size(), plan.trainers);
  for (int32_t t = 0; t < plan.trainers; ++t) {
    if (schedules[size_t(t)].size() != schedules[0].size())
      return strf("pipeline %d has %zu stages, pipeline 0 %zu", t, schedules[size_t(t)].size(),
                  schedules[0].size());
    const std::string err = check_message_order(schedules[size_t(t)], list_size(plan, t));
    if (!err.empty()) return strf("pipeline %d: ", t) + err;
  }
  return "";
}

}  // namespace

std::string simulate_pipelines(const Plan& plan, std::span<const PipeSchedule> schedules) {
  const std::string shapes = check_shapes(plan, schedules);
  if (!shapes.empty() || plan.trainers == 0) return shapes;
  return Pipelines(plan, schedules, {}, int(schedules[0].size())).run_all();
}

std::vector<PipeTiming> pipeline_timings(const Plan& plan, const PipelineModel& model,
                                         const CostModel& cost) {
  const PipelineSlots slots = pipeline_slots(plan);
  std::vector<PipeSchedule> schedules;
  std::vector<PipeCosts> costs;
  const std::vector<std::vector<MicroBatchLoad>> loads = plan_loads(plan, cost);
  for (int32_t t = 0; t < plan.trainers; ++t) {
    schedules.push_back(pipeline_schedule(plan, slots, t, model.pp()));
    costs.push_back(pipe_costs(model, loads[size_t(t)]));
  }
  Pipelines run(plan, schedules, costs, model.pp());
  const std::string err = run.run_all();
  if (!err.empty()) throw Error("pipeline timing: " + err);
  return std::move(run.timing);
}

std::vector<double> pipeline_times(const Plan& plan, const PipelineModel& model,
                                   const CostModel& cost) {
  std::vector<double> out;
  for (const PipeTiming& t : pipeline_timings(plan, model, cost)) out.push_back(t.makespan);
  return out;
}

}  // namespace meshloom::plan
