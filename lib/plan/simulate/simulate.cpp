#include "plan/simulate/simulate.hpp"

#include <algorithm>

#include "base/check.hpp"
#include "base/strings.hpp"
#include "plan/model_shape.hpp"
#include "plan/planner.hpp"

namespace meshloom::plan {

const SimRow* SimResult::row(config::Planner planner) const {
  for (const SimRow& r : rows)
    if (r.planner == planner) return &r;
  return nullptr;
}

Hardware trainer_hardware(const SimulateSpec& s) {
  Hardware hw;
  hw.flops = s.gpu_flops * s.mfu * s.tp;
  hw.bandwidth = s.gpu_bandwidth * s.tp;
  hw.intra_bandwidth = s.nvlink_bandwidth * s.tp;
  hw.trainers_per_node = std::max(1, s.gpus_per_node / s.tp);
  hw.latency = s.latency;
  hw.host_bandwidth = s.host_bandwidth * s.tp;
  hw.host_memory = s.host_memory * s.tp;
  hw.micro_batch_overhead = s.micro_batch_overhead;
  hw.tp = s.tp;
  hw.tp_link_bandwidth = s.nvlink_bandwidth;
  return hw;
}

DeviceMemoryInput memory_input(const SimulateSpec& s, const model::Shape& shape,
                               int32_t hdp_ranks) {
  DeviceMemoryInput in;
  in.shape = shape;
  in.elem_bytes = 2;
  in.tp = s.tp;
  in.trainers = std::max(1, hdp_ranks);
  in.zero1 = true;
  in.rings = true;
  in.nccl = true;
  return in;
}

int64_t capacity_auto(const SimulateSpec& s, const model::Shape& shape) {
  DeviceMemoryInput in = memory_input(s, shape, s.gpus / s.tp);
  const int64_t c = capacity_for_memory(in, kUsableGpuMemory * s.gpu_memory) / 1024 * 1024;
  if (c < 1024) {
    in.tokens = 1024;
    throw Error(
        strf("capacity auto: %s with 1K tokens needs %s per GPU at TP %d, more than "
             "%.0f%% of %.0f GB of GPU memory (--gpu-memory)",
             shape.name.c_str(), human_bytes(double(device_memory(in).total())).c_str(), s.tp,
             kUsableGpuMemory * 100, s.gpu_memory / 1e9));
  }
  return c;
}

SimResult simulate(const SimulateSpec& spec, const LengthSampler& sampler) {
  SimulateSpec s = spec;
  if (s.gpus < 1 || s.tp < 1 || s.gpus % s.tp != 0)
    throw Error(strf("gpus (%d) must be a positive multiple of tp (%d)", s.gpus, s.tp));
  if (s.capacity <= 0) s.capacity = capacity_auto(s, model_shape(s.model));
  if (s.steps < 1) throw Error("steps must be at least 1");
  SimResult res;
  res.spec = s;
  res.capacity_auto = spec.capacity <= 0;
  res.shape = model_shape(s.model);
  res.cost = CostModel::from_shape(res.shape, trainer_hardware(s));
  res.trainers = s.gpus / s.tp;
  res.distribution = sampler.name();
  PlannerOptions o;
  o.trainers = res.trainers;
  o.capacity = s.capacity;
  o.slack = s.slack;
  o.offload = s.offload;
  o.static_fallback = s.static_fallback;
  o.cp_algorithm = s.cp_algorithm;
  o.seq_len_max = s.context;
  for (config::Planner planner : s.planners) {
    SimRow row;
    row.planner = planner;
    res.rows.push_back(row);
  }
  for (int step = 0; step < s.steps; ++step) {
    const std::vector<int64_t> lengths =
        draw_batch(sampler, s.batch, s.context, s.seed + uint64_t(step) * 7919);
    res.sequences += double(lengths.size()) / s.steps;
    const IdealBound bound = ideal_bound(lengths, o, res.cost);
    const double ideal = bound.value();
    res.ideal_s += ideal / s.steps;
    res.balanced_s += bound.balanced / s.steps;
    res.ring_bound_steps += bound.fastest_ring >= ideal;
    for (SimRow& row : res.rows) {
      if (!row.error.empty()) continue;
      try {
        const Plan p = plan_step({row.planner}, lengths, o, res.cost);
        if (s.validate) {
          const std::string err = p.validate();
          if (!err.empty()) throw Error(err);
        }
        const PlanStats st = plan_stats(p);
        row.step_s += st.makespan / s.steps;
        row.imbalance += st.imbalance / s.steps;
        row.gap += (st.lower_bound > 0 ? st.makespan / st.lower_bound : 1.0) / s.steps;
        row.comm_bytes += st.comm_bytes / s.steps;
        row.a2a_bytes += st.a2a_bytes / s.steps;
        add_cp_counts(row.cp, cp_counts(p), 1.0 / s.steps);
        row.ideal += (ideal > 0 ? st.makespan / ideal : 1.0) / s.steps;
        row.planning.push_back(p.planning_seconds);
        row.idle += st.idle_fraction / s.steps;
        row.mb_min = step == 0 ? st.min_micro_batches : std::min(row.mb_min, st.min_micro_batches);
        row.mb_max = std::max(row.mb_max, st.max_micro_batches);
        row.split += st.split_sequences;
        row.max_group = std::max(row.max_group, st.max_group);
        row.static_cp = p.static_cp;
        if (s.keep_first && step == 0) row.first = p;
      } catch (const Error& e) {
        row.error = e.what();
      }
    }
  }
  for (SimRow& row : res.rows) {
    row.split /= s.steps;
    if (row.planning.empty()) continue;
    std::vector<double> v = row.planning;
    std::sort(v.begin(), v.end());
    row.planning_s = v[v.size() / 2];
    row.planning_max_s = v.back();
  }
  return res;
}

std::string model_line(const model::Shape& m) {
  return strf("model %s (%.1fB params, %d layers, %d heads, %d KV heads, hidden %lld)\n",
              m.name.c_str(), m.parameters() / 1e9, int(m.n_layers), int(m.n_heads),
              int(m.n_kv_heads), (long long)m.d_model);
}

std::string simulate_report(const SimResult& r) {
  const SimulateSpec& s = r.spec;
  std::string out;
  out += model_line(r.shape);
  out += strf(
      "%d GPUs = %d trainers x TP %d; capacity C = %s tokens/trainer%s; context %s; batch %s "
      "tokens; %s lengths (%.0f sequences/step); %d step(s)\n",
      s.gpus, r.trainers, s.tp, format_tokens(s.capacity).c_str(),
      r.capacity_auto ? strf(" (auto: what fits %.0f%% of %.0f GB per GPU)", kUsableGpuMemory * 100,
                             s.gpu_memory / 1e9)
                            .c_str()
                      : "",
      format_tokens(s.context).c_str(), format_tokens(s.batch).c_str(), r.distribution.c_str(),
      r.sequences, s.steps);
  out += strf("GPU %.0f TFLOP/s peak x MFU %.2f; %.0f GB/s across nodes, %.0f GB/s NVLink; %s\n",
              s.gpu_flops / 1e12, s.mfu, s.gpu_bandwidth / 1e9, s.nvlink_bandwidth / 1e9,
              s.offload ? "selective offloading on" : "no offloading");
  out += "cost model per trainer: " + r.cost.describe() + "\n";
  out += strf(
      "ideal step %s (perfect balance %s%s): the least any HDP plan could reach; idle: trainers "
      "waiting for ring partners or done early\n\n",
      human_seconds(r.ideal_s).c_str(), human_seconds(r.balanced_s).c_str(),
      r.ring_bound_steps > 0
          ? strf("; in %d of %d steps the longest sequence's fastest ring sets it",
                 r.ring_bound_steps, s.steps)
                .c_str()
          : "");
  const SimRow* base = r.row(config::Planner::static_grid);
  out +=
      "| planner | step time | speedup vs static | imbalance (max/mean) | step / ideal | "
      "idle | ring traffic / step | micro-batches per trainer | split seqs (max group) | "
      "planning |\n";
  out += "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
  for (const SimRow& row : r.rows) {
    if (!row.error.empty()) {
      out += strf("| %s | (cannot plan: %s) | | | | | | | | |\n", config::enum_name(row.planner),
                  row.error.c_str());
      continue;
    }
    const bool has_base = base && base->error.empty() && row.step_s > 0;
    std::string name = config::enum_name(row.planner);
    if (row.static_cp > 0)
      name += strf(" (%sCP %d x DP %d)",
                   row.planner == config::Planner::static_grid ? "" : "static fallback: ",
                   row.static_cp, r.trainers / row.static_cp);
    out += strf("| %s | %s | %s | %.3f | %.3f | %.1f%% | %s | %d-%d | %lld (%d) | %.1f ms |\n",
                name.c_str(), human_seconds(row.step_s).c_str(),
                has_base ? strf("%.2fx", base->step_s / row.step_s).c_str() : "-", row.imbalance,
                row.ideal, 100.0 * row.idle, human_bytes(row.comm_bytes - row.a2a_bytes).c_str(),
                row.mb_min, row.mb_max, (long long)row.split, row.max_group, row.planning_s * 1e3);
  }
  if (s.cp_algorithm == config::CpAlgorithm::ring) return out;
  out += strf("\nCP algorithms (%s; a TP rank has %d heads, %d KV), split sequences per step:\n",
              config::enum_name(s.cp_algorithm), r.cost.heads.heads, r.cost.heads.kv_heads);
  for (const SimRow& row : r.rows)
    if (row.error.empty())
      out += strf("  %s: %s; all-to-all traffic %s/step\n", config::enum_name(row.planner),
                  format_cp_counts(row.cp).c_str(), human_bytes(row.a2a_bytes).c_str());
  return out;
}

std::string csv_field(std::string text) {
  for (char& c : text)
    if (c == ',' || c == '\n') c = ';';
  return text;
}

std::string simulate_csv_header() {
  return "model,gpus,tp,trainers,capacity,context,batch,lengths,sequences,planner,step_s,"
         "speedup_vs_static,imbalance,step_over_ideal,idle,comm_bytes,planning_ms_median,"
         "planning_ms_max,mb_min,mb_max,split,max_group,static_cp,ideal_s,balanced_s,"
         "ring_bound_steps,cp_algorithm,a2a_bytes,cp_mix,error\n";
}

std::string simulate_csv_rows(const SimResult& r) {
  const SimulateSpec& s = r.spec;
  const SimRow* base = r.row(config::Planner::static_grid);
  std::string out;
  for (const SimRow& row : r.rows) {
    const double speedup = speedup_over(base, row);
    const std::string err = csv_field(row.error);
    out += strf(
        "%s,%d,%d,%d,%lld,%lld,%lld,%s,%.0f,%s,%.6g,%.4f,%.5f,%.5f,%.5f,%.6g,%.3f,%.3f,%d,%d,"
        "%lld,%d,%d,%.6g,%.6g,%d,%s,%.6g,%s,%s\n",
        s.model.c_str(), s.gpus, s.tp, r.trainers, (long long)s.capacity, (long long)s.context,
        (long long)s.batch, r.distribution.c_str(), r.sequences, config::enum_name(row.planner),
        row.step_s, speedup, row.imbalance, row.ideal, row.idle, row.comm_bytes,
        row.planning_s * 1e3, row.planning_max_s * 1e3, row.mb_min, row.mb_max,
        (long long)row.split, row.max_group, row.static_cp, r.ideal_s, r.balanced_s,
        r.ring_bound_steps, config::enum_name(s.cp_algorithm), row.a2a_bytes,
        csv_field(format_cp_counts(row.cp)).c_str(), err.c_str());
  }
  return out;
}

}  // namespace meshloom::plan
