// Trainer::evaluate: the training forward without its backward, over
// held-out data planned like a step (train/trainer.hpp). The micro-batches
// run on the same group communicators, rings and pipeline stages as a step;
// the backend's forward_loss() computes the same loss sums without any
// gradient, in the activation buffers training uses.
#include <algorithm>

#include "base/clock.hpp"
#include "base/strings.hpp"
#include "train/trainer.hpp"

namespace meshloom::train {

namespace {

void check_edges(std::span<const int64_t> edges) {
  for (size_t i = 0; i < edges.size(); ++i)
    ML_CHECK(i == 0 ? edges[i] == 0 : edges[i] > edges[i - 1],
             strf("evaluation position buckets: edges must ascend from 0; edge %zu is %lld", i,
                  (long long)edges[i]));
}

// The scored predictions' losses (positions >= SampleInfo::scored_from) to
// their samples: a micro-batch's tokens run segment by segment.
void add_sample_scores(const StepInput& in, const MicroInput& mb,
                       const std::vector<double>& token_loss, std::vector<double>& scores) {
  const model::Batch& b = mb.batch;
  size_t k = 0;
  for (const SampleRun& run : mb.runs) {
    const int64_t from = in.samples.at(size_t(run.sample)).scored_from;
    for (int64_t i = 0; i < run.length; ++i, ++k)
      if (from >= 0 && b.targets[k] >= 0 && b.positions[k] >= from) {
        scores.resize(std::max(scores.size(), in.samples.size()), 0.0);
        scores[size_t(run.sample)] += token_loss[k];
      }
  }
}

}  // namespace

void Trainer::account_eval(const StepInput& in, const MicroInput& mb, const model::LossSum& ls,
                           std::span<const int64_t> edges, EvalStats& st) const {
  const model::Batch& b = mb.batch;
  // model_flops counts forward + backward as 3 forwards (the matrix products
  // and attention's unmasked pairs); the forward is a third, shared by the
  // HDP rank's tp x pp trainers as in account().
  st.flops += model::model_flops(model_->shape(), b) / 3.0 / double(tp_ * pp_);
  if (!reports()) return;
  st.tokens += b.size();
  st.loss_sum += ls.sum;
  st.predictions += ls.count;
  add_source_losses(in, mb, ls.token_loss, st.source_loss, st.source_predictions);
  if (ls.token_loss.size() != size_t(b.size())) return;
  add_sample_scores(in, mb, ls.token_loss, st.sample_scores);
  if (edges.empty()) return;
  for (size_t k = 0; k < ls.token_loss.size(); ++k) {
    if (b.targets[k] < 0) continue;
    const int64_t p = b.positions[k];
    const size_t bucket = size_t(std::upper_bound(edges.begin(), edges.end(), p) - edges.begin());
    if (bucket == 0) continue;  // below edge 0: positions are never negative
    st.position_loss[bucket - 1] += ls.token_loss[k];
    ++st.position_predictions[bucket - 1];
  }
}

EvalStats Trainer::evaluate(const StepInput& in, std::span<const int64_t> position_edges) {
  const auto t0 = Clock::now();
  check_edges(position_edges);
  StepStats groups;  // the communicators' numbers: a step's metrics, not reported here
  prepare_groups(in, groups);
  EvalStats st;
  if (reports()) {
    st.source_loss.assign(w_.config.data.sources.size(), 0.0);
    st.source_predictions.assign(w_.config.data.sources.size(), 0);
    st.position_loss.assign(position_edges.size(), 0.0);
    st.position_predictions.assign(position_edges.size(), 0);
  }
  std::vector<model::LossSum> losses;
  if (pp_ > 1) {
    losses = run_eval_pipeline(in);
  } else {
    for (size_t i = 0; i < in.micro.size(); ++i) {
      const MicroInput& mb = in.micro[i];
      double attn_l2 = 0;
      const RingGroup ring = ring_of(in, mb, &attn_l2);
      losses.push_back(backend_->forward_loss(mb.batch, {}, ring.members.empty() ? nullptr : &ring,
                                              int(i), mb.offload));
    }
  }
  for (size_t i = 0; i < in.micro.size(); ++i)
    account_eval(in, in.micro[i], i < losses.size() ? losses[i] : model::LossSum{}, position_edges,
                 st);
  st.seconds = seconds_since(t0);
  return st;
}

}  // namespace meshloom::train
