// Rules that involve more than one key. Each error names the key it is about,
// and the place that key was written.
#include <algorithm>
#include <set>

#include "base/strings.hpp"
#include "config/config.hpp"

namespace meshloom::config {

namespace {

void validate_eval(const Config& c, const Origin& origin) {
  const EvalConfig& e = c.eval;
  if (e.every > 0 && e.holdout <= 0 && e.sources.empty())
    origin.error("eval.every",
                 "eval.every needs held-out data: set eval.holdout (a share of each source's "
                 "documents, say 0.01) or eval.sources");
  std::vector<std::string> names;
  for (const SourceConfig& s : c.data.sources) names.push_back(s.name);
  for (const std::string& name : e.sources) {
    const auto it = std::find(names.begin(), names.end(), name);
    if (it == names.end()) {
      std::string msg = "eval.sources names '" + name + "', which data.sources lacks";
      const std::string near = nearest(name, names);
      if (!near.empty()) msg += "; did you mean '" + near + "'?";
      origin.error("eval.sources", msg);
      continue;
    }
    bool trained = c.data.sources[size_t(it - names.begin())].weight > 0 && c.data.schedule.empty();
    for (const ScheduleEntry& point : c.data.schedule) {
      const auto w = point.weights.find(name);
      trained |= w != point.weights.end() && w->second > 0;
    }
    if (trained)
      origin.error("eval.sources",
                   "eval.sources names '" + name +
                       "', which the mixture trains on: give it weight 0 (data.sources and "
                       "data.schedule), as an evaluation-only source");
  }
  const std::vector<int64_t>& p = e.positions;
  for (size_t i = 0; i < p.size(); ++i)
    if ((i == 0 && p[0] != 0) || (i > 0 && p[i] <= p[i - 1]) || p[i] >= c.data.seq_len)
      origin.error("eval.positions",
                   strf("eval.positions must start at 0 and increase below data.seq_len (%lld); "
                        "entry %zu is %lld",
                        (long long)c.data.seq_len, i, (long long)p[i]));
  const PasskeyConfig& k = e.passkey;
  for (int64_t length : k.lengths)
    if (length < 64 || length > c.data.seq_len)
      origin.error("eval.passkey.lengths",
                   strf("eval.passkey.lengths: %lld is not between 64 and data.seq_len (%lld); "
                        "meshloom eval --seq-len raises data.seq_len",
                        (long long)length, (long long)c.data.seq_len));
  for (double depth : k.depths)
    if (!(depth >= 0 && depth <= 1))
      origin.error("eval.passkey.depths",
                   strf("eval.passkey.depths: %g is not between 0 and 1", depth));
}

}  // namespace

void validate(const Config& c, const Origin& origin) {
  const ModelConfig& m = c.model;
  if (m.d_model % m.n_heads != 0)
    origin.error("model.n_heads", strf("model.d_model (%lld) must be divisible by model.n_heads "
                                       "(%lld)",
                                       (long long)m.d_model, (long long)m.n_heads));
  if (((m.d_model / m.n_heads) % 2) != 0)
    origin.error("model.n_heads", strf("the head size d_model / n_heads = %lld must be even "
                                       "(rotary embedding pairs dimensions)",
                                       (long long)(m.d_model / m.n_heads)));
  if (m.n_heads % m.n_kv_heads != 0)
    origin.error("model.n_kv_heads",
                 strf("model.n_heads (%lld) must be a multiple of model.n_kv_heads (%lld)",
                      (long long)m.n_heads, (long long)m.n_kv_heads));

  const RopeScalingConfig& rs = m.rope_scaling;
  if (rs.type == RopeScaling::llama3 && !(rs.high_freq_factor > rs.low_freq_factor))
    origin.error("model.rope_scaling.high_freq_factor",
                 strf("model.rope_scaling.high_freq_factor (%g) must exceed low_freq_factor (%g)",
                      rs.high_freq_factor, rs.low_freq_factor));

  // Megatron's split: whole query and KV heads and FFN columns per TP rank.
  const int64_t tp = c.parallel.tp;
  for (const auto& [key, value] : {std::pair<const char*, int64_t>{"model.n_heads", m.n_heads},
                                   {"model.n_kv_heads", m.n_kv_heads},
                                   {"model.ffn_dim", m.ffn_dim}})
    if (value % tp != 0)
      origin.error("parallel.tp", strf("parallel.tp (%lld) must divide %s (%lld): each TP rank "
                                       "holds whole heads and an equal share of the FFN",
                                       (long long)tp, key, (long long)value));

  const int64_t pp = c.parallel.pp;
  if (pp > m.n_layers)
    origin.error("parallel.pp", strf("parallel.pp (%lld) exceeds model.n_layers (%lld): every "
                                     "pipeline stage holds at least one layer",
                                     (long long)pp, (long long)m.n_layers));
  // Pipeline stages keep every activation on the device: an offloading plan
  // would count memory the stages never free.
  if (pp > 1 && c.plan.offload)
    origin.error("plan.offload",
                 strf("plan.offload is not implemented with pipelines (parallel.pp %lld): set "
                      "plan.offload: false, or parallel.pp: 1",
                      (long long)pp));
  const auto& stages = c.parallel.stage_layers;
  if (!stages.empty()) {
    int64_t sum = 0;
    for (int64_t l : stages) sum += l;
    const bool positive =
        std::all_of(stages.begin(), stages.end(), [](int64_t l) { return l >= 1; });
    if (int64_t(stages.size()) != pp || !positive || sum != m.n_layers)
      origin.error("parallel.stage_layers",
                   strf("parallel.stage_layers must list parallel.pp (%lld) layer counts, each at "
                        "least 1, summing to model.n_layers (%lld); it lists %zu summing to %lld",
                        (long long)pp, (long long)m.n_layers, stages.size(), (long long)sum));
  }

  if (c.optim.min_lr > c.optim.lr)
    origin.error("optim.min_lr", "optim.min_lr must not exceed optim.lr");

  const DataConfig& d = c.data;
  if (d.sources.empty()) origin.error("data", "data.sources must list at least one source");
  std::set<std::string> names;
  std::vector<std::string> name_list;
  for (size_t i = 0; i < d.sources.size(); ++i) {
    const SourceConfig& s = d.sources[i];
    const std::string at = "data.sources[" + std::to_string(i) + "]";
    if (s.name.empty()) origin.error(at + ".name", "a source name must not be empty");
    if (!names.insert(s.name).second)
      origin.error(at + ".name", "source name '" + s.name + "' is used twice");
    name_list.push_back(s.name);
    const std::string& t = s.tokenizer;
    if (t != "byte" && t != "gpt2" && !(starts_with(t, "tiktoken:") && t.size() > 9) &&
        !(starts_with(t, "hf:") && t.size() > 3))
      origin.error(at + ".tokenizer", "'" + at + ".tokenizer' is '" + t +
                                          "', one of: byte, gpt2, tiktoken:NAME|FILE, hf:FILE");
  }
  if (d.schedule.empty() && !d.sources.empty() &&
      std::none_of(d.sources.begin(), d.sources.end(),
                   [](const SourceConfig& s) { return s.weight > 0; }))
    origin.error("data.sources", "every source has weight 0: give one a weight > 0");
  int64_t last_step = -1;
  for (size_t i = 0; i < d.schedule.size(); ++i) {
    const ScheduleEntry& e = d.schedule[i];
    const std::string at = "data.schedule[" + std::to_string(i) + "]";
    if (e.step <= last_step)
      origin.error(at + ".step", "schedule steps must increase: " + std::to_string(e.step) +
                                     " follows " + std::to_string(last_step));
    last_step = e.step;
    double total = 0;
    for (const auto& [name, w] : e.weights) {
      const std::string key = at + ".weights." + name;
      if (!names.count(name)) {
        std::string msg = "the schedule names source '" + name + "', which data.sources lacks";
        std::string near = nearest(name, name_list);
        if (!near.empty()) msg += "; did you mean '" + near + "'?";
        origin.error(key, msg);
      }
      if (w < 0) origin.error(key, "'" + key + "' is negative; weights must be >= 0");
      total += w;
    }
    if (e.weights.empty() || total <= 0)
      origin.error(at + ".weights", "'" + at + ".weights' must give some source a weight > 0");
  }
  if (d.long_policy.share > 0 && d.long_policy.threshold <= 0)
    origin.error("data.long_policy.threshold",
                 "data.long_policy.share needs data.long_policy.threshold > 0");
  if (d.mode == DataMode::disaggregated && c.cluster.roles.loaders < 1)
    origin.error("cluster.roles.loaders",
                 "data.mode 'disaggregated' needs cluster.roles.loaders >= 1 (or data.mode: "
                 "colocated)");
  validate_eval(c, origin);
  if (d.colocated_processes > 0 && d.mode != DataMode::colocated)
    origin.error("data.colocated_processes",
                 "data.colocated_processes applies only with data.mode: colocated");
}

}  // namespace meshloom::config
