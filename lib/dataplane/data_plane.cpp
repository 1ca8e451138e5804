#include "dataplane/data_plane.hpp"

#include <algorithm>
#include <cstring>

#include "base/bytes.hpp"
#include "base/check.hpp"
#include "base/strings.hpp"

namespace meshloom::dataplane {

int64_t StepManifest::tokens() const {
  int64_t n = 0;
  for (const auto& p : samples) n += p.length;
  return n;
}

DataPlane::DataPlane(const config::Config& config, std::vector<int64_t> docs_per_source,
                     LengthFn length)
    : budget_(config.data.tokens_per_step),
      seq_len_(config.data.seq_len),
      long_share_(config.data.long_policy.share),
      schedule_(config.data),
      length_(std::move(length)) {
  const size_t n = config.data.sources.size();
  ML_CHECK(docs_per_source.size() == n, "one document count per source");
  const int64_t threshold = long_share_ > 0 ? config.data.long_policy.threshold : 0;
  for (size_t i = 0; i < n; ++i) {
    const Holdout holdout = holdout_of(config, i);
    int64_t doc = 0;
    while (doc < docs_per_source[i] && holdout(doc)) ++doc;
    if (doc == docs_per_source[i] && !evaluation_only(config, i))
      throw Error(
          strf("data.sources[%zu] '%s': all %lld of its documents fall in the held-out "
               "split (eval.holdout %g): lower eval.holdout or add documents",
               i, config.data.sources[i].name.c_str(), (long long)docs_per_source[i],
               config.eval.holdout));
    streams_.emplace_back(int(i), uint64_t(config.run.seed), docs_per_source[i], threshold,
                          holdout);
  }
  state_.target.assign(n, 0.0);
  state_.delivered.assign(n, 0.0);
}

int DataPlane::pick_source(bool need_long, const std::vector<double>& weights) {
  int best = -1;
  double best_deficit = 0;
  for (size_t i = 0; i < streams_.size(); ++i) {
    if (weights[i] <= 0) continue;
    if (need_long && !streams_[i].available(Lane::long_docs, length_)) continue;
    double deficit = state_.target[i] - state_.delivered[i];
    if (best < 0 || deficit > best_deficit) {
      best = int(i);
      best_deficit = deficit;
    }
  }
  return best;
}

StepManifest DataPlane::next() {
  StepManifest m;
  m.step = state_.step;
  const std::vector<double> w = schedule_.weights(state_.step);
  for (size_t i = 0; i < w.size(); ++i) state_.target[i] += w[i] * double(budget_);
  state_.long_target += long_share_ * double(budget_);
  int64_t remaining = budget_;
  while (remaining > 0) {
    int source = -1;
    Lane lane = Lane::short_docs;
    if (long_share_ > 0 && state_.long_target - state_.long_delivered > 0) {
      source = pick_source(true, w);
      if (source >= 0) lane = Lane::long_docs;
      if (source < 0 && state_.long_delivered == 0) long_lane_empty_ = true;
    }
    if (source < 0) {
      source = pick_source(false, w);
      ML_CHECK(source >= 0, "no source has a positive weight");
      // A used-up short lane with long documents left gives those first.
      if (!streams_[source].available(Lane::short_docs, length_) &&
          streams_[source].available(Lane::long_docs, length_))
        lane = Lane::long_docs;
    }
    Piece p = streams_[source].take(lane, std::min(seq_len_, remaining), length_);
    state_.delivered[source] += double(p.length);
    if (p.long_lane) state_.long_delivered += double(p.length);
    remaining -= p.length;
    m.samples.push_back(p);
  }
  ++state_.step;
  return m;
}

const DataPlane::State& DataPlane::state() const {
  state_.streams.clear();
  for (const auto& s : streams_) state_.streams.push_back(s.state());
  return state_;
}

void DataPlane::restore(const State& state) {
  // The state comes from a checkpoint, perhaps of a config with other sources.
  if (state.streams.size() != streams_.size() || state.target.size() != streams_.size())
    throw Error("data plane state is for a different number of sources");
  state_ = state;
  for (size_t i = 0; i < streams_.size(); ++i) streams_[i].restore(state.streams[i]);
}

// --- serialization: little-endian fixed-width fields, versioned ------------------

namespace {
constexpr uint32_t kStateMagic = 0x4d4c4450;  // "PDLM"
}  // namespace

std::string serialize(const DataPlane::State& s) {
  ByteWriter w;
  w.put(kStateMagic);
  w.put(uint32_t(1));
  w.put(s.step);
  w.put(uint64_t(s.streams.size()));
  for (size_t i = 0; i < s.streams.size(); ++i) {
    w.put(s.streams[i].epoch);
    for (const auto& lane : s.streams[i].lanes) {
      w.put(lane.cursor);
      w.put(lane.offset);
    }
    w.put(s.target[i]);
    w.put(s.delivered[i]);
  }
  w.put(s.long_target);
  w.put(s.long_delivered);
  return std::move(w.bytes());
}

DataPlane::State deserialize_state(const std::string& in) {
  ByteReader r(in, "data plane state");
  if (r.get<uint32_t>() != kStateMagic) throw Error("not a data plane state");
  if (r.get<uint32_t>() != 1) throw Error("unsupported data plane state version");
  DataPlane::State s;
  s.step = r.get<int64_t>();
  // A source takes at least 8 (epoch) + 16 (target, delivered) bytes.
  const uint64_t n = r.get_count(24);
  s.streams.resize(n);
  s.target.resize(n);
  s.delivered.resize(n);
  for (size_t i = 0; i < n; ++i) {
    s.streams[i].epoch = r.get<int64_t>();
    for (auto& lane : s.streams[i].lanes) {
      lane.cursor = r.get<int64_t>();
      lane.offset = r.get<int64_t>();
    }
    s.target[i] = r.get<double>();
    s.delivered[i] = r.get<double>();
  }
  s.long_target = r.get<double>();
  s.long_delivered = r.get<double>();
  if (!r.done()) r.fail_corrupt("trailing bytes");
  return s;
}

}  // namespace meshloom::dataplane
