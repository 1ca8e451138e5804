// One micro-batch as the model consumes it: tokens packed back to back, each
// with its input id, its target (the id it must predict, or -1), its position
// and the id of the sample it belongs to.
//
// Attention lets token i see token j exactly when sample[i] == sample[j] and
// pos[j] <= pos[i]; nothing else about the layout matters. pack() builds the
// common case (whole samples, position ids restarting at 0, token t predicting
// token t+1 of its sample, the last token of a sample predicting nothing).
// A context-parallel trainer fills the four arrays itself: a chunk of a
// sequence keeps its global positions and its sequence's sample id, and the
// last token of a chunk targets the first token of the next chunk.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace meshloom::model {

struct Batch {
  std::vector<int32_t> tokens;
  std::vector<int32_t> targets;    // -1: no prediction
  std::vector<int32_t> positions;  // RoPE positions and the causal order
  std::vector<int32_t> samples;    // the document mask: equal ids may attend

  int64_t size() const { return static_cast<int64_t>(tokens.size()); }
  // Targets that are not -1.
  int64_t predictions() const;
  // Fails (ML_CHECK) on arrays of different lengths, ids outside [0, vocab),
  // targets outside [-1, vocab), negative positions.
  void validate(int64_t vocab) const;

  // Samples of the given lengths, back to back; sample k gets id first_id + k.
  static Batch pack(std::span<const int32_t> tokens, std::span<const int32_t> sample_lengths,
                    int32_t first_id = 0);
};

}  // namespace meshloom::model
