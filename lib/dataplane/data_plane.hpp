// The centralized data plane: which samples make up each step.
//
// Rank 0 runs one DataPlane. Every step it fills a budget of
// data.tokens_per_step tokens with samples (pieces of at most data.seq_len
// tokens) taken from the sources' streams, in each stream's own order. Which
// stream gives the next sample is decided by token deficits: each step adds
// weight_s(step) * budget to source s's target, and the source furthest below
// its target goes next. Realized shares therefore track the schedule to within
// one sample, and because deficits are counted in tokens and the streams are
// separate, changing weights (a curriculum) never loses or repeats a sample.
// The long/short policy works the same way one level up: a deficit between the
// long share asked for and the long tokens delivered picks the lane.
//
// The budget is filled exactly: the step's last sample may be a piece whose
// rest opens the next step of that source.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "dataplane/schedule.hpp"
#include "dataplane/stream.hpp"

namespace meshloom::dataplane {

// One step's samples, in the order they were chosen (the manifest order).
struct StepManifest {
  int64_t step = 0;
  std::vector<Piece> samples;
  int64_t tokens() const;
};

class DataPlane {
 public:
  struct State {
    int64_t step = 0;
    std::vector<SourceStream::State> streams;
    std::vector<double> target, delivered;  // per source, tokens
    double long_target = 0, long_delivered = 0;
  };

  // docs_per_source[i]: document count of data.sources[i].
  DataPlane(const config::Config& config, std::vector<int64_t> docs_per_source, LengthFn length);

  // Chooses the next step's samples and advances.
  StepManifest next();

  const State& state() const;
  void restore(const State& state);
  const std::vector<SourceStream>& streams() const { return streams_; }
  // True once a long piece was due but no source (of positive weight) has a
  // document longer than data.long_policy.threshold: with nothing long
  // delivered before, the whole epoch was looked at, so the long share is 0.
  bool long_lane_empty() const { return long_lane_empty_; }
  size_t sources() const { return streams_.size(); }

 private:
  // The source furthest below its target (with long documents left, if need_long).
  int pick_source(bool need_long, const std::vector<double>& weights);

  int64_t budget_, seq_len_;
  double long_share_;
  MixtureSchedule schedule_;
  LengthFn length_;
  std::vector<SourceStream> streams_;
  mutable State state_;
  bool long_lane_empty_ = false;
};

// Binary form of the state (checkpoints, shadows).
std::string serialize(const DataPlane::State& state);
DataPlane::State deserialize_state(const std::string& bytes);

}  // namespace meshloom::dataplane
