#include "plan/simulate/simulate_pipeline.hpp"

#include <algorithm>
#include <limits>
#include <numeric>

#include "base/check.hpp"
#include "base/strings.hpp"
#include "plan/cost/device_memory.hpp"
#include "plan/model_shape.hpp"
#include "plan/pipeline/pipeline_slots.hpp"
#include "plan/pipeline/pp_balance.hpp"
#include "plan/pipeline/pp_plan.hpp"
#include "plan/planners/static_planner.hpp"

namespace meshloom::plan {

namespace {

using Lists = std::vector<std::vector<MicroBatchLoad>>;

// C of a stage holding `layers` layers and `in_flight` micro-batches'
// activations, rounded down to 1K.
int64_t stage_capacity(const SimulateSpec& spec, const model::Shape& shape, int32_t pipelines,
                       int layers, int in_flight) {
  model::Shape stage = shape;
  stage.n_layers = layers;
  DeviceMemoryInput in = memory_input(spec, stage, pipelines);
  in.in_flight = in_flight;
  return capacity_for_memory(in, kUsableGpuMemory * spec.gpu_memory) / 1024 * 1024;
}

// The least C over the stages: stage s keeps pp - s micro-batches under 1F1B.
int64_t pipeline_capacity(const SimulateSpec& spec, const model::Shape& shape, int32_t pipelines,
                          const std::vector<int>& stage_layers) {
  const int pp = int(stage_layers.size());
  int64_t c = std::numeric_limits<int64_t>::max();
  for (int s = 0; s < pp; ++s)
    c = std::min(c, stage_capacity(spec, shape, pipelines, stage_layers[s], pp - s));
  return c;
}

// Each pipeline's list run 1F1B.
PipelineStep run_pipelines(std::string setup, const Lists& lists, const PipelineModel& model) {
  PipelineStep st;
  st.setup = std::move(setup);
  for (const auto& list : lists) {
    st.timing.push_back(simulate_one_f_one_b(model, list));
    st.micro_batch.push_back(int32_t(list.size()));
  }
  return st;
}

// A plan's pipelines as the runtime runs them (rings coupling them).
PipelineStep plan_pipelines(std::string setup, const Plan& plan, const PipelineModel& model,
                            const CostModel& cost) {
  PipelineStep st;
  st.setup = std::move(setup);
  st.timing = pipeline_timings(plan, model, cost);
  for (int32_t t = 0; t < plan.trainers; ++t)
    st.micro_batch.push_back(int32_t(plan.micro_batches_of(t).size()));
  return st;
}

// Adds each piece's real tokens to its sequence, `ids` mapping the plan's
// sequences to the batch's.
void add_placed(const Plan& plan, const std::vector<int32_t>& ids, std::vector<int64_t>& placed) {
  for (const Piece& pc : plan.pieces)
    placed[size_t(ids[size_t(pc.seq)])] += plan.chunks(pc).tokens();
}

std::vector<int32_t> identity(size_t n) {
  std::vector<int32_t> ids(n);
  std::iota(ids.begin(), ids.end(), 0);
  return ids;
}

double seconds_of(const PipelineModel& model, const MicroBatchLoad& m) {
  const std::vector<double> st = stage_seconds(model, m);
  return std::accumulate(st.begin(), st.end(), 0.0);
}

}  // namespace

std::vector<int> pp_candidates(const SimulateSpec& spec, const model::Shape& shape) {
  std::vector<int> out;
  for (int pp = 1; pp <= 16 && pp <= shape.n_layers; pp *= 2)
    if (spec.gpus % (spec.tp * pp) == 0) out.push_back(pp);
  return out;
}

PipelineFit pipeline_fit(const SimulateSpec& spec, const model::Shape& shape, const CostModel& cost,
                         int pp) {
  if (pp < 1 || spec.tp < 1 || spec.gpus % (spec.tp * pp) != 0)
    throw Error(
        strf("gpus (%d) must be a positive multiple of tp x pp (%d x %d)", spec.gpus, spec.tp, pp));
  PipelineFit f;
  f.pp = pp;
  f.pipelines = spec.gpus / (spec.tp * pp);
  int64_t c = spec.capacity;
  if (c <= 0)  // an even split first: the cost-based one needs C's micro-batch
    c = pipeline_capacity(spec, shape, f.pipelines,
                          std::vector<int>(size_t(pp), (shape.n_layers + pp - 1) / pp));
  const int64_t typical[] = {std::max<int64_t>(c, 1024)};
  f.stage_layers =
      balance_stages(layer_costs(shape, cost), pp, MicroBatchLoad::of_lengths(typical));
  if (spec.capacity <= 0) c = pipeline_capacity(spec, shape, f.pipelines, f.stage_layers);
  if (c < 1024) {
    f.why = strf("a stage with 1K tokens needs more than %.0f%% of %.0f GB", kUsableGpuMemory * 100,
                 spec.gpu_memory / 1e9);
    return f;
  }
  f.capacity = c;
  try {
    f.static_cp = static_cp_degree(spec.context, c, f.pipelines);
  } catch (const Error&) {
    f.why = strf("a %s sequence needs %lld pipelines of C = %s, there are %d",
                 format_tokens(spec.context).c_str(), (long long)((spec.context + c - 1) / c),
                 format_tokens(c).c_str(), f.pipelines);
  }
  return f;
}

double PipelineStep::makespan() const {
  double m = 0;
  for (const PipeTiming& t : timing) m = std::max(m, t.makespan);
  return m;
}

double PipelineStep::bubble() const {
  double sum = 0;
  int n = 0;
  for (size_t p = 0; p < timing.size(); ++p)
    if (micro_batch[p] > 0) sum += timing[p].bubble(), ++n;
  return n > 0 ? sum / n : 0;
}

double PipelineStep::idle(int pp) const {
  const double step = makespan();
  if (step <= 0 || timing.empty()) return 0;
  double busy = 0;
  for (const PipeTiming& t : timing) busy = std::accumulate(t.busy.begin(), t.busy.end(), busy);
  return 1 - busy / (double(timing.size()) * pp * step);
}

int32_t PipelineStep::fewest() const {
  return micro_batch.empty() ? 0 : *std::min_element(micro_batch.begin(), micro_batch.end());
}

int32_t PipelineStep::most() const {
  return micro_batch.empty() ? 0 : *std::max_element(micro_batch.begin(), micro_batch.end());
}

PipelineStep static_pipelines(const std::vector<int64_t>& lengths, const PlannerOptions& o,
                              const CostModel& cost, const PipelineModel& model) {
  const Plan p = plan_step({config::Planner::static_grid}, lengths, o, cost);
  const int32_t cp = p.static_cp, dp = o.trainers / cp;
  // The grid's packed micro-batches (every member of a DP rank runs the same
  // list: member 0's), costliest first, dealt in a snake for equal counts.
  std::vector<MicroBatchLoad> all;
  for (int32_t d = 0; d < dp; ++d)
    for (const MicroBatch& mb : p.micro_batches_of(d * cp))
      all.push_back(pipeline_load(p, mb, cost));
  std::stable_sort(all.begin(), all.end(), [&](const auto& x, const auto& y) {
    return seconds_of(model, x) > seconds_of(model, y);
  });
  Lists lists(static_cast<size_t>(dp));
  for (size_t j = 0; j < all.size(); ++j) {
    const size_t pos = j % size_t(dp);
    lists[(j / size_t(dp)) % 2 ? size_t(dp) - 1 - pos : pos].push_back(all[j]);
  }
  const PipelineStep grid = run_pipelines("static", lists, model);
  PipelineStep st;  // each DP rank's timing on its CP pipelines, in lock step
  st.setup = grid.setup;
  for (int32_t d = 0; d < dp; ++d)
    for (int32_t c = 0; c < cp; ++c) {
      st.timing.push_back(grid.timing[size_t(d)]);
      st.micro_batch.push_back(grid.micro_batch[size_t(d)]);
    }
  st.static_cp = cp;
  st.placed.assign(lengths.size(), 0);
  add_placed(p, identity(lengths.size()), st.placed);
  return st;
}

PipelineStep dp_balance_pipelines(const std::vector<int64_t>& lengths, const PlannerOptions& o,
                                  const CostModel& cost, const PipelineModel& model) {
  const Plan p = plan_step({config::Planner::bytescale}, lengths, o, cost);
  PipelineStep st = plan_pipelines("dp-balance", p, model, cost);
  st.placed.assign(lengths.size(), 0);
  add_placed(p, identity(lengths.size()), st.placed);
  return st;
}

PipelineStep pp_balance_pipelines(const std::vector<int64_t>& lengths, const PlannerOptions& o,
                                  const CostModel& cost, const PipelineModel& model) {
  // The runtime's plan.balance: pp (pp_plan.hpp): hdp's rings first, then
  // PP-Balance of the rest with the rings as each pipeline's starting load;
  // hdp's own plan where that is predicted faster.
  const Plan p = pp_step_plan(lengths, o, cost, model);
  PipelineStep st = plan_pipelines("pp-balance", p, model, cost);
  st.hdp_placement = p.planner == config::enum_name(config::Planner::hdp);
  for (int32_t t = 0; t < p.trainers; ++t) {  // pipelines that got short sequences
    bool short_ones = false;
    for (const MicroBatch& mb : p.micro_batches_of(t))
      short_ones = short_ones || p.group_size(p.pieces_of(mb)[0].seq) == 1;
    st.short_pipelines += short_ones;
  }
  st.placed.assign(lengths.size(), 0);
  add_placed(p, identity(lengths.size()), st.placed);
  return st;
}

const PipeSimRow* PipeSimResult::row(const std::string& setup) const {
  for (const PipeSimRow& r : rows)
    if (r.setup == setup) return &r;
  return nullptr;
}

namespace {

using Setup = PipelineStep (*)(const std::vector<int64_t>&, const PlannerOptions&, const CostModel&,
                               const PipelineModel&);

// The PP degree of the run: `pp`, or the smallest candidate that fits.
PipelineFit choose_fit(PipeSimResult& res, int pp) {
  const SimulateSpec& s = res.spec;
  for (int c : pp_candidates(s, res.shape))
    res.candidates.push_back(pipeline_fit(s, res.shape, res.cost, c));
  if (pp > 0) {
    auto it = std::find_if(res.candidates.begin(), res.candidates.end(),
                           [&](const PipelineFit& f) { return f.pp == pp; });
    const PipelineFit f =
        it != res.candidates.end() ? *it : pipeline_fit(s, res.shape, res.cost, pp);
    if (it == res.candidates.end()) res.candidates.push_back(f);
    if (!f.fits()) throw Error(strf("--pp %d does not fit: %s", pp, f.why.c_str()));
    return f;
  }
  for (const PipelineFit& f : res.candidates)
    if (f.fits()) return f;
  throw Error(
      strf("no PP degree of %d GPUs at TP %d fits %s (see --pp N)", s.gpus, s.tp, s.model.c_str()));
}

}  // namespace

PipeSimResult simulate_pipelines(const SimulateSpec& spec, const LengthSampler& sampler, int pp) {
  if (spec.gpus < 1 || spec.tp < 1 || spec.gpus % spec.tp != 0)
    throw Error(strf("gpus (%d) must be a positive multiple of tp (%d)", spec.gpus, spec.tp));
  if (spec.steps < 1) throw Error("steps must be at least 1");
  if (spec.offload) throw Error("--pp does not model offloading (drop --offload)");
  if (pp < 0) throw Error(strf("--pp %d: must be at least 1 (or auto)", pp));
  PipeSimResult res;
  res.spec = spec;
  res.capacity_auto = spec.capacity <= 0;
  res.pp_auto = pp == 0;
  res.shape = model_shape(spec.model);
  res.cost = CostModel::from_shape(res.shape, trainer_hardware(spec));
  res.distribution = sampler.name();
  res.fit = choose_fit(res, pp);
  SimulateSpec& s = res.spec;
  s.capacity = res.fit.capacity;
  const PipelineModel model = pipeline_model(res.shape, res.cost, res.fit.stage_layers);
  PlannerOptions o;
  o.trainers = res.fit.pipelines;
  o.capacity = s.capacity;
  o.slack = s.slack;
  o.seq_len_max = s.context;
  const std::vector<std::pair<std::string, Setup>> setups = {{"static", static_pipelines},
                                                             {"dp-balance", dp_balance_pipelines},
                                                             {"pp-balance", pp_balance_pipelines}};
  for (const auto& setup : setups) {
    res.rows.emplace_back();
    res.rows.back().setup = setup.first;
  }
  for (int step = 0; step < s.steps; ++step) {
    const std::vector<int64_t> lengths =
        draw_batch(sampler, s.batch, s.context, s.seed + uint64_t(step) * 7919);
    res.sequences += double(lengths.size()) / s.steps;
    int64_t long_tokens = 0;
    for (int64_t L : lengths)
      if (L > s.capacity) res.long_sequences += 1.0 / s.steps, long_tokens += L;
    res.long_tokens += double(long_tokens) / double(s.batch) / s.steps;
    for (size_t k = 0; k < setups.size(); ++k) {
      PipeSimRow& row = res.rows[k];
      if (!row.error.empty()) continue;
      try {
        const PipelineStep st = setups[k].second(lengths, o, res.cost, model);
        ML_CHECK(st.placed == lengths, row.setup + ": a sequence is not placed exactly once");
        row.step_s += st.makespan() / s.steps;
        row.bubble += st.bubble() / s.steps;
        row.idle += st.idle(res.fit.pp) / s.steps;
        row.mb_min = step == 0 ? st.fewest() : std::min(row.mb_min, st.fewest());
        row.mb_max = std::max(row.mb_max, st.most());
        row.static_cp = st.static_cp;
        row.short_pipelines += double(st.short_pipelines) / s.steps;
        row.hdp_share += double(st.hdp_placement) / s.steps;
      } catch (const Error& e) {
        row.error = e.what();
      }
    }
  }
  return res;
}

namespace {

std::string layers_text(const std::vector<int>& stage_layers) {
  std::vector<std::string> parts;
  for (int l : stage_layers) parts.push_back(std::to_string(l));
  return join(parts, "/");
}

std::string fit_table(const PipeSimResult& r) {
  std::string out =
      "| pp | pipelines (HDP ranks) | layers per stage | C per pipeline | static grid | fits |\n"
      "| --- | --- | --- | --- | --- | --- |\n";
  for (const PipelineFit& f : r.candidates)
    out +=
        strf("| %d%s | %d | %s | %s | %s | %s |\n", f.pp, f.pp == r.fit.pp ? " (used)" : "",
             f.pipelines, layers_text(f.stage_layers).c_str(),
             f.capacity > 0 ? format_tokens(f.capacity).c_str() : "-",
             f.static_cp > 0 ? strf("CP %d x DP %d", f.static_cp, f.pipelines / f.static_cp).c_str()
                             : "-",
             f.fits() ? "yes" : ("no: " + f.why).c_str());
  return out;
}

}  // namespace

std::string pipeline_report(const PipeSimResult& r) {
  const SimulateSpec& s = r.spec;
  const PipelineFit& f = r.fit;
  std::string out;
  out += model_line(r.shape);
  out += strf(
      "%d GPUs = %d pipelines (HDP ranks) x %d stages x TP %d; layers per stage %s; C = %s "
      "tokens per pipeline%s\n",
      s.gpus, f.pipelines, f.pp, s.tp, layers_text(f.stage_layers).c_str(),
      format_tokens(s.capacity).c_str(),
      r.capacity_auto
          ? strf(" (auto: stage 0 with %d micro-batches in flight fits %.0f%% of %.0f GB)", f.pp,
                 kUsableGpuMemory * 100, s.gpu_memory / 1e9)
                .c_str()
          : "");
  out += strf(
      "context %s; batch %s tokens; %s lengths: %.0f sequences/step, %.1f longer than C "
      "(%.1f%% of the tokens, split into rings); %d step(s)\n",
      format_tokens(s.context).c_str(), format_tokens(s.batch).c_str(), r.distribution.c_str(),
      r.sequences, r.long_sequences, 100 * r.long_tokens, s.steps);
  out += strf("GPU %.0f TFLOP/s peak x MFU %.2f; %.0f GB/s across nodes, %.0f GB/s NVLink\n",
              s.gpu_flops / 1e12, s.mfu, s.gpu_bandwidth / 1e9, s.nvlink_bandwidth / 1e9);
  out += "cost model per stage group (TP group, whole model): " + r.cost.describe() + "\n";
  out += r.pp_auto ? strf("pp %d: the smallest PP degree that fits (below)\n\n", f.pp)
                   : strf("pp %d as asked (--pp); the others for comparison:\n\n", f.pp);
  out += fit_table(r) + "\n";
  const PipeSimRow* base = r.row("static");
  out +=
      "| setup | step time | speedup vs static | bubble (own 1F1B) | idle (bubble + waiting for "
      "the slowest) | micro-batches per pipeline |\n"
      "| --- | --- | --- | --- | --- | --- |\n";
  for (const PipeSimRow& row : r.rows) {
    if (!row.error.empty()) {
      out += strf("| %s | (cannot plan: %s) | | | | |\n", row.setup.c_str(), row.error.c_str());
      continue;
    }
    std::string name = row.setup;
    if (row.static_cp > 0)
      name += strf(" (CP %d x DP %d)", row.static_cp, f.pipelines / row.static_cp);
    if (row.setup == "pp-balance")
      name += strf(" (short ones on %.0f pipelines%s)", row.short_pipelines,
                   row.hdp_share > 0
                       ? strf("; hdp's plan on %.0f%% of steps", 100 * row.hdp_share).c_str()
                       : "");
    const double speedup = speedup_over(base, row);
    out +=
        strf("| %s | %s | %s | %.1f%% | %.1f%% | %d-%d |\n", name.c_str(),
             human_seconds(row.step_s).c_str(), speedup > 0 ? strf("%.2fx", speedup).c_str() : "-",
             100 * row.bubble, 100 * row.idle, row.mb_min, row.mb_max);
  }
  return out;
}

std::string pipeline_csv_header() {
  return "model,gpus,tp,pp,pipelines,capacity,context,batch,lengths,sequences,long_sequences,"
         "long_token_share,setup,step_s,speedup_vs_static,bubble,idle,mb_min,mb_max,static_cp,"
         "short_pipelines,error\n";
}

std::string pipeline_csv_rows(const PipeSimResult& r) {
  const SimulateSpec& s = r.spec;
  const PipeSimRow* base = r.row("static");
  std::string out;
  for (const PipeSimRow& row : r.rows) {
    const double speedup = speedup_over(base, row);
    const std::string err = csv_field(row.error);
    out += strf(
        "%s,%d,%d,%d,%d,%lld,%lld,%lld,%s,%.0f,%.2f,%.5f,%s,%.6g,%.4f,%.5f,%.5f,%d,%d,%d,%.0f,%s\n",
        s.model.c_str(), s.gpus, s.tp, r.fit.pp, r.fit.pipelines, (long long)s.capacity,
        (long long)s.context, (long long)s.batch, r.distribution.c_str(), r.sequences,
        r.long_sequences, r.long_tokens, row.setup.c_str(), row.step_s, speedup, row.bubble,
        row.idle, row.mb_min, row.mb_max, row.static_cp, row.short_pipelines, err.c_str());
  }
  return out;
}

}  // namespace meshloom::plan
