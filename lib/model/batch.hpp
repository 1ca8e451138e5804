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
//
// Images (Fuyu-style, a model with Shape::patch_dim P > 0): an image
// position has token kImagePosition (-1) and target -1 (it predicts
// nothing); its input is the next P values of `patches`, which holds one
// patch per image position, in the order of the positions in the batch. The
// model embeds it as patch_embed · patch instead of embed[token]; positions,
// samples and the mask treat it like any token. A patch is what lib/image
// makes of an image: patches in raster order, in a patch pixel rows,
// columns, then R, G, B, each value x/255·2 − 1. pack() makes text only;
// a caller that interleaves images fills the arrays itself.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace meshloom::model {

// The token of an image position.
inline constexpr int32_t kImagePosition = -1;

struct Batch {
  std::vector<int32_t> tokens;     // or kImagePosition
  std::vector<int32_t> targets;    // -1: no prediction
  std::vector<int32_t> positions;  // RoPE positions and the causal order
  std::vector<int32_t> samples;    // the document mask: equal ids may attend
  std::vector<float> patches;      // P values per image position, in order

  int64_t size() const { return static_cast<int64_t>(tokens.size()); }
  // Targets that are not -1.
  int64_t predictions() const;
  // Positions whose token is kImagePosition.
  int64_t images() const;
  // Fails (ML_CHECK) on arrays of different lengths, ids outside [0, vocab)
  // (or kImagePosition with patch_dim > 0), targets outside [-1, vocab), an
  // image position with a target, negative positions, or patches that are
  // not patch_dim values per image position.
  void validate(int64_t vocab, int64_t patch_dim = 0) const;

  // Samples of the given lengths, back to back; sample k gets id first_id + k.
  static Batch pack(std::span<const int32_t> tokens, std::span<const int32_t> sample_lengths,
                    int32_t first_id = 0);
};

}  // namespace meshloom::model
