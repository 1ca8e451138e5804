#include "plan/pipeline/pp_balance.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/check.hpp"
#include "base/strings.hpp"

namespace meshloom::plan {

namespace {

// Pipeline p's starting load (0 without any).
double start_of(const std::vector<double>& start, int32_t p) {
  return start.empty() ? 0.0 : start[size_t(p)];
}

using MicroBatches = std::vector<std::vector<int32_t>>;

void check_inputs(const std::vector<int64_t>& lengths, const PipelineBalanceOptions& o) {
  if (o.pipelines < 1) throw Error(strf("%d pipelines: need at least one", o.pipelines));
  if (o.capacity < 1) throw Error(strf("capacity %lld: need at least 1", (long long)o.capacity));
  if (o.slack < 0) throw Error(strf("slack %g: must not be negative", o.slack));
  if (!o.start.empty() && int32_t(o.start.size()) != o.pipelines)
    throw Error(strf("%zu starting loads for %d pipelines", o.start.size(), o.pipelines));
  for (double t : o.start)
    if (!(t >= 0 && std::isfinite(t)))
      throw Error(strf("starting load %g: need a finite t >= 0", t));
  for (size_t i = 0; i < lengths.size(); ++i)
    if (lengths[i] < 1 || lengths[i] > o.capacity)
      throw Error(
          strf("sequence %zu has %lld tokens; pipeline scheduling takes sequences of "
               "1..C = %lld tokens (HDP splits longer ones)",
               i, (long long)lengths[i], (long long)o.capacity));
}

// Seconds of one sequence through the whole pipeline, forward and backward.
double work_of(const PipelineModel& model, int64_t length) {
  const int64_t one[] = {length};
  double w = 0;
  for (const PartCost& st : model.stages)
    w += st.seconds(MicroBatchLoad::of_lengths(one)) - st.fixed;
  return w;
}

// Longest first, cut into `count` buckets of about equal work.
MicroBatches work_buckets(const std::vector<int64_t>& lengths, int32_t count,
                          const PipelineModel& model) {
  std::vector<int32_t> order(lengths.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t x, int32_t y) { return lengths[x] > lengths[y]; });
  double total = 0;
  for (int64_t L : lengths) total += work_of(model, L);
  MicroBatches buckets(1);
  double acc = 0;
  for (int32_t i : order) {
    if (acc >= total * double(buckets.size()) / count && !buckets.back().empty() &&
        int32_t(buckets.size()) < count)
      buckets.emplace_back();
    buckets.back().push_back(i);
    acc += work_of(model, lengths[i]);
  }
  return buckets;
}

// First fit, in the given order, into micro-batches of at most C tokens.
MicroBatches first_fit(const std::vector<int32_t>& items, const std::vector<int64_t>& lengths,
                       int64_t capacity) {
  MicroBatches bins;
  std::vector<int64_t> room;
  for (int32_t i : items) {
    size_t b = 0;
    while (b < bins.size() && room[b] < lengths[i]) ++b;
    if (b == bins.size()) {
      bins.emplace_back();
      room.push_back(capacity);
    }
    bins[b].push_back(i);
    room[b] -= lengths[i];
  }
  return bins;
}

std::vector<MicroBatchLoad> loads_of(const MicroBatches& mbs, const std::vector<int64_t>& lengths) {
  std::vector<MicroBatchLoad> out;
  for (const auto& mb : mbs) {
    MicroBatchLoad m;
    for (int32_t i : mb) {
      m.tokens += double(lengths[i]);
      m.attn_l2 += double(lengths[i]) * double(lengths[i]);
    }
    out.push_back(m);
  }
  return out;
}

// Predicted 1F1B makespans of runs of the micro-batch list.
struct Segments {
  const PipelineModel& model;
  const std::vector<MicroBatchLoad>& loads;
  int32_t size() const { return int32_t(loads.size()); }
  double time(int32_t begin, int32_t end) const {
    return simulate_one_f_one_b(model, std::span(loads).subspan(begin, end - begin)).makespan;
  }
};

bool within(double t, double target) { return t <= target * (1 + 1e-12); }

// The furthest end > begin whose run [begin, end) fits `target` (the
// makespan grows with the run), or begin when not even one fits.
int32_t furthest_end(const Segments& seg, int32_t begin, double target) {
  const int32_t n = seg.size();
  if (!within(seg.time(begin, begin + 1), target)) return begin;
  int32_t ok = begin + 1, bad = n + 1;
  for (int32_t step = 1;; step *= 2) {  // gallop, then bisect
    const int32_t probe = std::min(n, ok + step);
    if (probe == ok) break;
    if (!within(seg.time(begin, probe), target)) {
      bad = probe;
      break;
    }
    ok = probe;
  }
  while (bad - ok > 1 && ok < n) {
    const int32_t mid = ok + (bad - ok) / 2;
    (within(seg.time(begin, mid), target) ? ok : bad) = mid;
  }
  return ok;
}

// Pipelines filled in order, each within `target` less its starting load
// (one whose load leaves no room for the next micro-batch takes none): D + 1
// offsets, or empty when the micro-batches do not all fit.
std::vector<int32_t> fill(const Segments& seg, const std::vector<double>& start, int32_t pipelines,
                          double target) {
  std::vector<int32_t> offsets = {0};
  int32_t cursor = 0;
  for (int32_t p = 0; p < pipelines; ++p) {
    if (cursor < seg.size()) cursor = furthest_end(seg, cursor, target - start_of(start, p));
    offsets.push_back(cursor);
  }
  if (cursor < seg.size()) return {};
  return offsets;
}

// No split of the list over D pipelines beats this: the most loaded
// pipeline's start; the costliest single micro-batch after the least start;
// every stage's total work plus all starts shared out evenly.
double least_target(const Segments& seg, const std::vector<double>& start, int32_t pipelines) {
  double most = 0, least = start.empty() ? 0.0 : start[0], sum = 0;
  for (double t : start) {
    most = std::max(most, t);
    least = std::min(least, t);
    sum += t;
  }
  double bound = most;
  for (int32_t j = 0; j < seg.size(); ++j) bound = std::max(bound, least + seg.time(j, j + 1));
  const PipeCosts c = pipe_costs(seg.model, seg.loads);
  for (int s = 0; s < c.pp(); ++s) {
    double busy = 0;
    for (int32_t j = 0; j < seg.size(); ++j) busy += c.forward[s][j] + c.backward[s][j];
    bound = std::max(bound, (busy + sum) / pipelines);
  }
  return bound;
}

PipelineBatch finish(std::string scheduler, MicroBatches mbs, std::vector<int32_t> offsets,
                     const std::vector<int64_t>& lengths, const PipelineModel& model) {
  PipelineBatch b;
  b.scheduler = std::move(scheduler);
  b.micro_batches = std::move(mbs);
  b.pipeline_begin = std::move(offsets);
  const std::vector<MicroBatchLoad> loads = loads_of(b.micro_batches, lengths);
  for (size_t p = 0; p + 1 < b.pipeline_begin.size(); ++p) {
    const int32_t begin = b.pipeline_begin[p], end = b.pipeline_begin[p + 1];
    b.timing.push_back(simulate_one_f_one_b(model, std::span(loads).subspan(begin, end - begin)));
  }
  return b;
}

}  // namespace

double PipelineBatch::makespan() const { return makespan({}); }

double PipelineBatch::makespan(const std::vector<double>& start) const {
  double m = 0;
  for (int32_t p = 0; p < pipelines(); ++p) m = std::max(m, start_of(start, p) + time(p));
  return m;
}

PipelineBatch pp_balance(const std::vector<int64_t>& lengths, const PipelineBalanceOptions& o,
                         const PipelineModel& model) {
  check_inputs(lengths, o);
  const int32_t D = o.pipelines;
  MicroBatches mbs;
  for (const auto& bucket : work_buckets(lengths, D, model))
    for (auto& mb : first_fit(bucket, lengths, o.capacity)) mbs.push_back(std::move(mb));
  const std::vector<MicroBatchLoad> loads = loads_of(mbs, lengths);
  const Segments seg{model, loads};
  if (mbs.empty()) return finish("pp-balance", {}, std::vector<int32_t>(D + 1, 0), lengths, model);

  // Bisect the target between a bound no split beats and pipeline 0
  // running everything after the largest start (always placeable).
  const double most = o.start.empty() ? 0.0 : *std::max_element(o.start.begin(), o.start.end());
  double lo = least_target(seg, o.start, D), hi = most + seg.time(0, seg.size());
  std::vector<int32_t> best = fill(seg, o.start, D, lo);
  if (best.empty()) {
    best = fill(seg, o.start, D, hi);
    const double tolerance = std::max(o.slack, 1e-6);
    for (int iter = 0; iter < 64 && hi > lo * (1 + tolerance); ++iter) {
      const double mid = 0.5 * (lo + hi);
      std::vector<int32_t> offsets = fill(seg, o.start, D, mid);
      if (offsets.empty()) {
        lo = mid;
      } else {
        hi = mid;
        best = std::move(offsets);
      }
    }
  }
  ML_CHECK(!best.empty(), "pp-balance placed no micro-batch");
  return finish("pp-balance", std::move(mbs), std::move(best), lengths, model);
}

PipelineBatch pp_balance_by_sequence(const std::vector<int64_t>& lengths,
                                     const PipelineBalanceOptions& o, const PipelineModel& model) {
  check_inputs(lengths, o);
  const int32_t D = o.pipelines;
  std::vector<int32_t> order(lengths.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t x, int32_t y) { return lengths[x] > lengths[y]; });
  struct Pipe {
    MicroBatches bins;
    std::vector<int64_t> room;
    std::vector<MicroBatchLoad> loads;
  };
  std::vector<Pipe> pipes(static_cast<size_t>(D));
  std::vector<MicroBatchLoad> trial;
  for (int32_t i : order) {
    const int64_t L = lengths[size_t(i)];
    int32_t best = 0;
    size_t best_bin = 0;
    double best_time = 0;
    for (int32_t p = 0; p < D; ++p) {
      const Pipe& pipe = pipes[size_t(p)];
      size_t bin = 0;  // first fit
      while (bin < pipe.bins.size() && pipe.room[bin] < L) ++bin;
      trial = pipe.loads;
      if (bin == trial.size()) trial.emplace_back();
      trial[bin].tokens += double(L);
      trial[bin].attn_l2 += double(L) * double(L);
      const double t = start_of(o.start, p) + simulate_one_f_one_b(model, trial).makespan;
      if (p == 0 || t < best_time * (1 - 1e-12)) {
        best = p;
        best_bin = bin;
        best_time = t;
      }
    }
    Pipe& pipe = pipes[size_t(best)];
    if (best_bin == pipe.bins.size()) {
      pipe.bins.emplace_back();
      pipe.room.push_back(o.capacity);
      pipe.loads.emplace_back();
    }
    pipe.bins[best_bin].push_back(i);
    pipe.room[best_bin] -= L;
    pipe.loads[best_bin].tokens += double(L);
    pipe.loads[best_bin].attn_l2 += double(L) * double(L);
  }
  MicroBatches mbs;
  std::vector<int32_t> offsets = {0};
  for (Pipe& pipe : pipes) {
    for (auto& bin : pipe.bins) mbs.push_back(std::move(bin));
    offsets.push_back(int32_t(mbs.size()));
  }
  return finish("pp-balance", std::move(mbs), std::move(offsets), lengths, model);
}

PipelineBatch pp_round_robin(const std::vector<int64_t>& lengths, const PipelineBalanceOptions& o,
                             const PipelineModel& model) {
  check_inputs(lengths, o);
  const int32_t D = o.pipelines;
  MicroBatches packed;  // next fit in batch order
  int64_t room = 0;
  for (int32_t i = 0; i < int32_t(lengths.size()); ++i) {
    if (packed.empty() || room < lengths[i]) {
      packed.emplace_back();
      room = o.capacity;
    }
    packed.back().push_back(i);
    room -= lengths[i];
  }
  MicroBatches mbs;  // micro-batch j to pipeline j mod D, pipeline by pipeline
  std::vector<int32_t> offsets = {0};
  for (int32_t p = 0; p < D; ++p) {
    for (size_t j = size_t(p); j < packed.size(); j += size_t(D)) mbs.push_back(packed[j]);
    offsets.push_back(int32_t(mbs.size()));
  }
  return finish("round-robin", std::move(mbs), std::move(offsets), lengths, model);
}

std::string check_pipeline_batch(const PipelineBatch& b, const std::vector<int64_t>& lengths,
                                 const PipelineBalanceOptions& o) {
  const auto& off = b.pipeline_begin;
  if (int32_t(off.size()) != o.pipelines + 1 || b.pipelines() != o.pipelines)
    return strf("%zu offsets and %d timings for %d pipelines", off.size(), b.pipelines(),
                o.pipelines);
  if (off.front() != 0 || off.back() != int32_t(b.micro_batches.size()) ||
      !std::is_sorted(off.begin(), off.end()))
    return "pipeline offsets do not cover the micro-batches in order";
  std::vector<int> seen(lengths.size(), 0);
  for (size_t j = 0; j < b.micro_batches.size(); ++j) {
    int64_t tokens = 0;
    for (int32_t i : b.micro_batches[j]) {
      if (i < 0 || size_t(i) >= lengths.size())
        return strf("micro-batch %zu holds sequence %d", j, i);
      ++seen[i];
      tokens += lengths[i];
    }
    if (b.micro_batches[j].empty()) return strf("micro-batch %zu is empty", j);
    if (tokens > o.capacity)
      return strf("micro-batch %zu holds %lld tokens, more than C = %lld", j, (long long)tokens,
                  (long long)o.capacity);
  }
  for (size_t i = 0; i < seen.size(); ++i)
    if (seen[i] != 1) return strf("sequence %zu is in %d micro-batches", i, seen[i]);
  for (int32_t p = 0; p < b.pipelines(); ++p)
    for (const auto& ops : b.timing[p].ops)
      if (int32_t(ops.size()) != 2 * b.micro_batches_of(p))
        return strf("pipeline %d: a stage times %zu ops for %d micro-batches", p, ops.size(),
                    b.micro_batches_of(p));
  return "";
}

}  // namespace meshloom::plan
