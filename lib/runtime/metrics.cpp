#include "runtime/metrics.hpp"

#include <algorithm>
#include <climits>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/math.hpp"
#include "base/strings.hpp"
#include "dataplane/eval_set.hpp"
#include "train/optimizer.hpp"

namespace meshloom::runtime {

using Json = nlohmann::ordered_json;

std::string describe_checkpoints(const std::vector<wire::Report>& reports) {
  const wire::Report* first = nullptr;  // trainer 0: the first trainer reporting saves
  double stall = 0;
  int64_t bytes_min = INT64_MAX, bytes_max = 0, peak_min = INT64_MAX, peak_max = 0;
  int64_t before_min = INT64_MAX, before_max = 0;
  for (const wire::Report& r : reports) {
    if (r.checkpoints == 0) continue;
    if (!first || r.rank < first->rank) first = &r;
    stall = std::max(stall, r.checkpoint_stall_seconds / r.checkpoints);
    bytes_min = std::min(bytes_min, r.checkpoint_bytes / r.checkpoints);
    bytes_max = std::max(bytes_max, r.checkpoint_bytes / r.checkpoints);
    peak_min = std::min(peak_min, r.peak_rss_kib);
    peak_max = std::max(peak_max, r.peak_rss_kib);
    before_min = std::min(before_min, r.peak_rss_before_checkpoints_kib);
    before_max = std::max(before_max, r.peak_rss_before_checkpoints_kib);
  }
  if (!first) return "";
  auto range = [](int64_t lo, int64_t hi, double unit) {
    return lo == hi ? human_bytes(double(lo) * unit)
                    : human_bytes(double(lo) * unit) + " to " + human_bytes(double(hi) * unit);
  };
  return strf(
      "checkpoints: %d saved, each in %s (trainer 0, start to file complete); training stood "
      "still %s for each (the slowest trainer); each wrote %s of state per checkpoint; peak "
      "memory per trainer %s (%s before the first save)",
      first->checkpoints,
      human_seconds(first->checkpoint_save_seconds / first->checkpoints).c_str(),
      human_seconds(stall).c_str(), range(bytes_min, bytes_max, 1).c_str(),
      range(peak_min, peak_max, 1024).c_str(), range(before_min, before_max, 1024).c_str());
}

StepFigures step_figures(const std::vector<wire::Ack>& acks) {
  StepFigures f;
  int64_t predictions = 0;
  std::vector<double> compute;
  f.micro_min = acks.empty() ? 0 : INT64_MAX;
  for (const auto& a : acks) {
    const int64_t micro = int64_t(a.micro.size() / wire::kMicroColumns);
    f.micro_min = std::min(f.micro_min, micro);
    f.micro_max = std::max(f.micro_max, micro);
    f.loss += a.loss_sum;
    predictions += a.predictions;
    f.tokens += a.tokens;
    f.flops += a.flops;
    f.max_compute = std::max(f.max_compute, a.compute_seconds);
    f.mean_compute += a.compute_seconds / double(acks.size());
    f.max_wait = std::max(f.max_wait, a.wait_seconds);
    f.wall = std::max(f.wall, a.step_seconds + a.wait_seconds);
    f.grad_norm = a.grad_norm;
    f.peak += a.peak_flops;
    compute.push_back(a.compute_seconds);
    add_elementwise(f.source_loss, a.source_loss);
    add_elementwise(f.source_predictions, a.source_predictions);
  }
  f.loss /= double(std::max<int64_t>(predictions, 1));
  std::sort(compute.begin(), compute.end());
  f.median_compute = compute.empty() ? 0 : compute[compute.size() / 2];
  return f;
}

std::vector<int> StragglerWatch::update(const std::vector<wire::Ack>& acks, double median) {
  std::vector<int> slow;
  for (const auto& a : acks) {
    int64_t& streak = streak_.at(size_t(a.trainer));
    streak = a.compute_seconds > factor_ * median ? streak + 1 : 0;
    if (streak >= steps_) slow.push_back(a.trainer);
  }
  return slow;
}

TrainMetrics::TrainMetrics(const parallel::World& w, const roles::Lead& lead, int64_t first,
                           int64_t end)
    : w_(w),
      lead_(lead),
      first_(first),
      end_(end),
      progress_(STDOUT_FILENO),
      stragglers_(w.layout.trainers, w.config.faults.straggler_factor,
                  w.config.faults.straggler_steps),
      eval_edges_(dataplane::position_edges(w.config)) {
  if (!w.config.log.metrics) return;
  std::filesystem::create_directories(w.config.run.dir);
  if (w.config.eval.every > 0)
    eval_csv_ = std::make_unique<EvalPositionsCsv>(w.config.run.dir + "/eval_positions.csv",
                                                   first > 0, eval_edges_, w.config.data.seq_len);
  const std::string path = w.config.run.dir + "/metrics.jsonl";
  jsonl_ = std::fopen(path.c_str(), first > 0 ? "a" : "w");
  if (!jsonl_) throw Error("cannot write " + path);
}

TrainMetrics::~TrainMetrics() {
  if (jsonl_) std::fclose(jsonl_);
}

void TrainMetrics::step(int64_t s, const std::vector<wire::Ack>& acks) {
  for (const auto& a : acks)
    if (!a.note.empty()) LOG_INFO("%s", a.note.c_str());
  const StepFigures f = step_figures(acks);
  const std::vector<int> slow = stragglers_.update(acks, f.median_compute);
  const int first_trainer = w_.layout.first_rank(parallel::Role::trainer);
  for (const auto& a : acks)
    if (stragglers_.just_reached(a.trainer)) {
      const int rank = first_trainer + a.trainer;
      LOG_WARN(
          "straggler: trainer %d (rank %d on %s) has been %.1fx slower than the median trainer "
          "for %lld steps (%s vs %s)",
          a.trainer, rank, w_.hosts[size_t(rank)].c_str(), a.compute_seconds / f.median_compute,
          (long long)stragglers_.streak(a.trainer), human_seconds(a.compute_seconds).c_str(),
          human_seconds(f.median_compute).c_str());
    }
  if (s == first_) first_loss_ = f.loss;
  last_loss_ = f.loss;
  add_to_windows(s, f);
  if (s == first_ && f.peak > 0)
    LOG_INFO("MFU is against %.1f GFLOP/s, the trainers' %s %s peak%s", f.peak / 1e9,
             w_.config.run.peak_gflops > 0 ? "configured" : "measured",
             w_.config.run.backend == config::Backend::cuda ? "GPU product" : "sgemm",
             w_.config.run.peak_gflops > 0 ? "" : " (run.peak_gflops sets a known one)");
  const std::optional<double> mfu = reported_mfu(s, f);
  log_step(s, f, mfu);
  const std::optional<EvalFigures> eval = eval_figures(acks);
  if (eval) {
    if (progress_.redraw()) std::printf("\r\033[K");
    LOG_INFO("%s", describe_eval(s, *eval, w_.config).c_str());
    if (!first_eval_) first_eval_ = eval->loss();
    last_eval_ = eval->loss();
    if (eval_csv_) eval_csv_->add(s, *eval);
  }
  show_progress(s);
  write_step(s, f, mfu, acks, slow, eval);
}

// None without a peak, and from the first step whose MFU exceeds 1 on: that
// step shows the peak too low, so every MFU against it overstates (warned once).
std::optional<double> TrainMetrics::reported_mfu(int64_t s, const StepFigures& f) {
  if (f.peak <= 0 || peak_too_low_) return std::nullopt;
  if (f.mfu() <= 1) return f.mfu();
  peak_too_low_ = true;
  const std::string why =
      w_.config.run.peak_gflops > 0
          ? strf("run.peak_gflops %g is below what the trainers reach; set it to their real peak",
                 w_.config.run.peak_gflops)
          : strf(
                "the sgemm peak measured at start (%.1f GFLOP/s) is below what the trainers "
                "reach (the node busy then, or the model's products faster than the "
                "measurement's); set run.peak_gflops to the node's trainers' real peak",
                f.peak / 1e9);
  LOG_WARN("MFU %.0f%% at step %lld is above 100%%: %s. MFU is n/a (peak unknown) from here on",
           100 * f.mfu(), (long long)s, why.c_str());
  return std::nullopt;
}

void TrainMetrics::log_step(int64_t s, const StepFigures& f, std::optional<double> mfu) {
  const int64_t steps = w_.config.run.steps;
  if (progress_.redraw()) std::printf("\r\033[K");
  if (s % w_.config.log.every == 0 || s + 1 == steps)
    LOG_INFO(
        "step %5lld  loss %.4f  lr %.2e  |g| %.3f  %7.0f tok/s  MFU %s  imbalance %.2f  "
        "data wait %s",
        (long long)s, f.loss, train::learning_rate(w_.config.optim, s, steps), f.grad_norm,
        double(f.tokens) / std::max(f.wall, 1e-9),
        mfu ? strf("%4.1f%%", 100 * *mfu).c_str() : "n/a (peak unknown)", f.imbalance(),
        human_seconds(f.max_wait).c_str());
  if (w_.mesh.pp > 1 && (s % w_.config.log.every == 0 || s + 1 == steps))
    LOG_INFO("step %5lld  micro-batches per pipeline: %lld to %lld (%s's plan)", (long long)s,
             (long long)f.micro_min, (long long)f.micro_max, lead_.planner_of(s).c_str());
}

// Redrawn, the bar follows every step's log line; as lines, one now and then.
void TrainMetrics::show_progress(int64_t s) {
  const int64_t steps = w_.config.run.steps;
  const double t = seconds_since(start_);
  if (!progress_.redraw() && !progress_.due(t, s + 1 == steps)) return;
  const double frac = double(s + 1 - first_) / double(steps - first_);
  const std::string eta = (frac < 1 ? "ETA " + human_seconds(t / frac * (1 - frac)) : "done") +
                          (last_eval_ ? strf("  held-out loss %.4f", *last_eval_) : "");
  if (progress_.redraw()) {
    const int bar = int(30 * frac);
    std::printf("[%s%s] %lld/%lld  %s", std::string(size_t(bar), '#').c_str(),
                std::string(size_t(30 - bar), '.').c_str(), (long long)s + 1, (long long)steps,
                eta.c_str());
  } else {
    std::printf("[train] step %lld/%lld  %s\n", (long long)s + 1, (long long)steps, eta.c_str());
  }
  std::fflush(stdout);
}

void TrainMetrics::SourceWindow::add(const StepFigures& f) {
  add_elementwise(loss, f.source_loss);
  add_elementwise(predictions, f.source_predictions);
}

std::optional<double> TrainMetrics::SourceWindow::mean(size_t source) const {
  if (source >= predictions.size() || predictions[source] == 0) return std::nullopt;
  return loss[source] / double(predictions[source]);
}

void TrainMetrics::add_to_windows(int64_t s, const StepFigures& f) {
  const int64_t window = std::max<int64_t>(1, (end_ - first_) / 10);
  if (s < first_ + window) early_.add(f);
  if (s >= end_ - window) late_.add(f);
}

// "loss by source, first -> last tenth of the steps: pydocs 10.81 -> 6.95,
// clipart 10.79 -> not seen in the last tenth (captions)": a source missing
// from a tenth is named, not dropped. Empty with one text source or no
// per-source losses (the GPU keeps none).
std::string TrainMetrics::describe_source_losses() const {
  const auto& sources = w_.config.data.sources;
  if (sources.size() < 2 && config::patch_dim(w_.config) == 0) return "";
  if (early_.predictions.empty() && late_.predictions.empty()) return "";
  std::vector<std::string> parts;
  for (size_t i = 0; i < sources.size(); ++i) {
    const std::optional<double> first = early_.mean(i), last = late_.mean(i);
    const char* captions =
        sources[i].format == config::SourceFormat::webdataset ? " (captions)" : "";
    if (!first && !last)
      parts.push_back(strf("%s not seen in the first or last tenth", sources[i].name.c_str()));
    else
      parts.push_back(strf("%s %s -> %s%s", sources[i].name.c_str(),
                           first ? strf("%.3f", *first).c_str() : "not seen in the first tenth",
                           last ? strf("%.3f", *last).c_str() : "not seen in the last tenth",
                           captions));
  }
  return "loss by source, first -> last tenth of the steps: " + join(parts, ", ");
}

// {"name": mean loss} of the sources with predictions in the step.
Json TrainMetrics::source_losses(const StepFigures& f) const {
  Json out = Json::object();
  for (size_t i = 0; i < f.source_loss.size(); ++i)
    if (f.source_predictions[i] > 0)
      out[w_.config.data.sources.at(i).name] = f.source_loss[i] / double(f.source_predictions[i]);
  return out;
}

void TrainMetrics::write_step(int64_t s, const StepFigures& f, std::optional<double> mfu,
                              const std::vector<wire::Ack>& acks,
                              const std::vector<int>& stragglers,
                              const std::optional<EvalFigures>& eval) {
  if (!jsonl_) return;
  const int first_trainer = w_.layout.first_rank(parallel::Role::trainer);
  Json slow = Json::array();
  for (int t : stragglers) slow.push_back(first_trainer + t);
  Json trainers = Json::array();
  for (const auto& a : acks) {
    // [[tokens, attention L^2/k, k, seconds], ...] per micro-batch
    Json micro = Json::array();
    for (size_t i = 0; i + 3 < a.micro.size(); i += wire::kMicroColumns)
      micro.push_back(
          {int64_t(a.micro[i]), a.micro[i + 1], int64_t(a.micro[i + 2]), a.micro[i + 3]});
    trainers.push_back({{"trainer", a.trainer},
                        {"tokens", a.tokens},
                        {"flops", a.flops},
                        {"compute", a.compute_seconds},
                        {"wait", a.wait_seconds},
                        {"step", a.step_seconds},
                        {"predicted", lead_.predicted_time(s, a.trainer)},
                        {"micro", micro}});
  }
  // The step's group communicators: every trainer's cache holds the same
  // sets (and, on the GPU, the same agreed costs), so one trainer's hits,
  // misses and device memory; the slowest split.
  const wire::Ack none;
  const wire::Ack& first = acks.empty() ? none : acks[0];
  Json groups = {{"hits", first.group_hits},
                 {"misses", first.group_misses},
                 {"split_seconds", 0.0},
                 {"device_mib", double(first.group_device_bytes) / double(1 << 20)},
                 {"device_evictions", first.group_device_evictions}};
  for (const auto& a : acks)
    groups["split_seconds"] =
        std::max(groups["split_seconds"].get<double>(), a.group_split_seconds);
  Json line = {{"data_hash", strf("%016llx", (unsigned long long)lead_.manifest_hash(s))},
               {"step", s},
               {"loss", f.loss},
               {"lr", train::learning_rate(w_.config.optim, s, w_.config.run.steps)},
               {"grad_norm", f.grad_norm},
               {"tokens", f.tokens},
               {"seconds", f.wall},
               {"tokens_per_s", double(f.tokens) / std::max(f.wall, 1e-9)},
               {"mfu", mfu ? Json(*mfu) : Json(nullptr)},
               {"imbalance", f.imbalance()},
               {"data_wait_max", f.max_wait},
               {"stragglers", slow},
               {"group_comms", groups},
               {"planner", lead_.planner_of(s)},
               {"source_loss", source_losses(f)},
               {"trainers", trainers}};
  if (eval) line["eval"] = eval_json(*eval, w_.config, eval_edges_);
  std::fprintf(jsonl_, "%s\n", line.dump().c_str());
  std::fflush(jsonl_);
}

void TrainMetrics::finish(std::vector<wire::Report> reports) {
  if (progress_.redraw()) std::printf("\n");
  if (jsonl_) {
    // Every rank's busy time and memory (loaders and constructors report only at the end).
    std::sort(reports.begin(), reports.end(),
              [](const wire::Report& a, const wire::Report& b) { return a.rank < b.rank; });
    Json ranks = Json::array();
    for (const auto& r : reports) {
      Json rank = {{"rank", r.rank},
                   {"role", parallel::role_name(parallel::Role(r.role))},
                   {"busy_seconds", r.busy_seconds},
                   {"tokens", r.tokens},
                   {"peak_rss_kib", r.peak_rss_kib},
                   {"pss_kib", r.pss_kib}};
      if (r.checkpoints > 0)
        rank["checkpoints"] = {{"saved", r.checkpoints},
                               {"bytes", r.checkpoint_bytes},
                               {"stall_seconds", r.checkpoint_stall_seconds},
                               {"save_seconds", r.checkpoint_save_seconds},
                               {"peak_rss_before_kib", r.peak_rss_before_checkpoints_kib}};
      ranks.push_back(std::move(rank));
    }
    std::fprintf(jsonl_, "%s\n", Json({{"final", true}, {"ranks", ranks}}).dump().c_str());
    std::fflush(jsonl_);
  }
  const int64_t steps = w_.config.run.steps;
  LOG_INFO(
      "trained steps %lld-%lld in %s: loss %.4f -> %.4f%s", (long long)first_, (long long)end_ - 1,
      human_seconds(seconds_since(start_)).c_str(), first_loss_, last_loss_,
      end_ < steps ? strf("; stopped before step %lld (--stop-at)", (long long)end_).c_str() : "");
  if (const std::string by_source = describe_source_losses(); !by_source.empty())
    LOG_INFO("%s", by_source.c_str());
  if (first_eval_)
    LOG_INFO(
        "held-out loss %.4f -> %.4f (metrics.jsonl \"eval\"; by position: %s/eval_positions.csv)",
        *first_eval_, *last_eval_, w_.config.run.dir.c_str());
  if (const std::string checkpoints = describe_checkpoints(reports); !checkpoints.empty())
    LOG_INFO("%s", checkpoints.c_str());
}

}  // namespace meshloom::runtime
