// A source's deterministic stream of samples.
//
// Each epoch visits the source's documents in a random permutation that
// depends only on (seed, source index, epoch), never on how many loaders serve
// the source, so the same config yields the same samples with 1 loader or 16.
// A document longer than the piece asked for is delivered in consecutive
// pieces: the rest stays at the head of the stream for the next sample and is
// never thrown away.
//
// Documents of the held-out split (dataplane/holdout.hpp) belong to no lane:
// the stream never delivers them, nor asks for their lengths.
//
// With a long/short policy the stream has two lanes: documents longer than the
// threshold go to the long lane, the others to the short lane, each lane in
// permutation order. Every document of an epoch is delivered exactly once, by
// its lane. A new epoch starts when both lanes are used up.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dataplane/holdout.hpp"

namespace meshloom::dataplane {

// A random permutation of [0, n) for (seed, source, epoch): Fisher-Yates with
// our own counter-based generator, so the result is the same on every
// platform and standard library.
std::vector<int64_t> permutation(uint64_t seed, int source, int64_t epoch, int64_t n);

// Tokens [offset, offset + length) of document `doc` of `source`.
struct Piece {
  int32_t source = 0;
  int64_t epoch = 0;
  int64_t doc = 0;
  int64_t offset = 0;
  int64_t length = 0;
  bool long_lane = false;
};

// The token count of a document; in the running system it may block until a
// loader has published it.
using LengthFn = std::function<int64_t(int source, int64_t doc)>;

enum class Lane { short_docs = 0, long_docs = 1 };

class SourceStream {
 public:
  struct LaneState {
    int64_t cursor = 0;  // position in the permutation of the lane's current document
    int64_t offset = 0;  // tokens of that document already delivered
  };
  struct State {
    int64_t epoch = 0;
    LaneState lanes[2];
  };

  // long_threshold 0: one lane (everything is short).
  SourceStream(int source, uint64_t seed, int64_t docs, int64_t long_threshold,
               Holdout holdout = {});

  // Whether `lane` still has a document in this epoch (may look lengths up).
  bool available(Lane lane, const LengthFn& length);
  // The next piece of `lane`, at most max_tokens long. Starts a new epoch when
  // both lanes are used up. Requires available(lane) or a fresh epoch.
  Piece take(Lane lane, int64_t max_tokens, const LengthFn& length);

  const State& state() const { return state_; }
  void restore(const State& state);
  int64_t docs() const { return docs_; }

 private:
  bool in_lane(Lane lane, int64_t doc, const LengthFn& length) const;
  void settle(Lane lane, const LengthFn& length);  // move the cursor to a document of the lane
  void new_epoch();

  int source_;
  uint64_t seed_;
  int64_t docs_;
  int64_t threshold_;
  Holdout holdout_;
  State state_;
  std::vector<int64_t> order_;  // this epoch's permutation
};

}  // namespace meshloom::dataplane
