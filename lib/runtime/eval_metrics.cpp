#include "runtime/eval_metrics.hpp"

#include <algorithm>
#include <cmath>

#include "base/check.hpp"
#include "base/math.hpp"
#include "base/strings.hpp"

namespace meshloom::runtime {

using Json = nlohmann::ordered_json;

namespace {

double mean(double sum, int64_t count) { return count > 0 ? sum / double(count) : 0; }

}  // namespace

void EvalFigures::add(const wire::EvalResult& o) {
  batches += o.batches;
  tokens += o.tokens;
  predictions += o.predictions;
  loss_sum += o.loss_sum;
  flops += o.flops;
  add_elementwise(source_loss, o.source_loss);
  add_elementwise(source_predictions, o.source_predictions);
  add_elementwise(position_loss, o.position_loss);
  add_elementwise(position_predictions, o.position_predictions);
  add_elementwise(sample_scores, o.sample_scores);
}

std::optional<EvalFigures> eval_figures(const std::vector<wire::Ack>& acks) {
  bool any = false;
  EvalFigures f;
  for (const wire::Ack& a : acks) {
    const wire::EvalResult& e = a.eval;
    if (e.batches == 0) continue;
    any = true;
    f.add(e);
    f.seconds = std::max(f.seconds, e.seconds);  // the trainers ran side by side
  }
  if (!any) return std::nullopt;
  return f;
}

std::string describe_eval(int64_t step, const EvalFigures& f, const config::Config& config) {
  std::string text =
      strf("%s: held-out loss %.4f (perplexity %.4g)",
           step >= 0 ? strf("eval after step %lld", (long long)step).c_str() : "eval", f.loss(),
           std::exp(f.loss()));
  const auto& sources = config.data.sources;
  if (sources.size() > 1)
    for (size_t i = 0; i < f.source_loss.size() && i < sources.size(); ++i)
      if (f.source_predictions[i] > 0)
        text += strf(", %s %.4f", sources[i].name.c_str(),
                     mean(f.source_loss[i], f.source_predictions[i]));
  return text + strf(", %lld tokens in %.3g s", (long long)f.tokens, f.seconds);
}

Json eval_json(const EvalFigures& f, const config::Config& config,
               const std::vector<int64_t>& edges) {
  Json sources = Json::object();
  for (size_t i = 0; i < f.source_loss.size(); ++i)
    if (f.source_predictions[i] > 0)
      sources[config.data.sources.at(i).name] = mean(f.source_loss[i], f.source_predictions[i]);
  Json positions = Json::array();
  for (size_t i = 0; i < f.position_loss.size() && i < edges.size(); ++i)
    positions.push_back(
        {edges[i], mean(f.position_loss[i], f.position_predictions[i]), f.position_predictions[i]});
  return {{"loss", f.loss()},       {"perplexity", std::exp(f.loss())},
          {"tokens", f.tokens},     {"predictions", f.predictions},
          {"seconds", f.seconds},   {"flops", f.flops},
          {"source_loss", sources}, {"position_loss", positions}};
}

EvalPositionsCsv::EvalPositionsCsv(const std::string& path, bool append, std::vector<int64_t> edges,
                                   int64_t seq_len)
    : edges_(std::move(edges)), seq_len_(seq_len) {
  file_ = std::fopen(path.c_str(), append ? "a" : "w");
  if (!file_) throw Error("cannot write " + path);
  if (!append || std::ftell(file_) == 0)
    std::fprintf(file_, "step,first_position,last_position,predictions,loss\n");
}

EvalPositionsCsv::~EvalPositionsCsv() {
  if (file_) std::fclose(file_);
}

void EvalPositionsCsv::add(int64_t step, const EvalFigures& f) {
  for (size_t i = 0; i < edges_.size() && i < f.position_loss.size(); ++i) {
    const int64_t last = i + 1 < edges_.size() ? edges_[i + 1] - 1 : seq_len_ - 1;
    std::fprintf(file_, "%lld,%lld,%lld,%lld,%.9g\n", (long long)step, (long long)edges_[i],
                 (long long)last, (long long)f.position_predictions[i],
                 mean(f.position_loss[i], f.position_predictions[i]));
  }
  std::fflush(file_);
}

}  // namespace meshloom::runtime
