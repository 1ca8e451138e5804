#include "dataplane/stream.hpp"

#include <algorithm>

#include "base/check.hpp"
#include "base/random.hpp"

namespace meshloom::dataplane {

std::vector<int64_t> permutation(uint64_t seed, int source, int64_t epoch, int64_t n) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[i] = i;
  uint64_t key = splitmix64(
      seed ^ splitmix64(uint64_t(source) * 0x100000001b3ULL ^ splitmix64(uint64_t(epoch))));
  for (int64_t i = n - 1; i > 0; --i) {
    // Unbiased index in [0, i] by multiply-shift on 64 random bits (bias < 2^-32 for n < 2^32).
    uint64_t r = splitmix64(key + uint64_t(i));
    int64_t j = int64_t((__uint128_t(r) * __uint128_t(uint64_t(i) + 1)) >> 64);
    std::swap(p[i], p[j]);
  }
  return p;
}

SourceStream::SourceStream(int source, uint64_t seed, int64_t docs, int64_t long_threshold,
                           Holdout holdout)
    : source_(source), seed_(seed), docs_(docs), threshold_(long_threshold), holdout_(holdout) {
  ML_CHECK(docs > 0, "a source needs at least one document");
  order_ = permutation(seed_, source_, 0, docs_);
}

void SourceStream::restore(const State& state) {
  bool new_order = state.epoch != state_.epoch;
  state_ = state;
  if (new_order) order_ = permutation(seed_, source_, state_.epoch, docs_);
}

void SourceStream::new_epoch() {
  const int64_t next = state_.epoch + 1;
  state_ = State{};
  state_.epoch = next;
  order_ = permutation(seed_, source_, next, docs_);
}

bool SourceStream::in_lane(Lane lane, int64_t doc, const LengthFn& length) const {
  if (holdout_(doc)) return false;
  if (threshold_ <= 0) return lane == Lane::short_docs;
  bool is_long = length(source_, doc) > threshold_;
  return is_long == (lane == Lane::long_docs);
}

void SourceStream::settle(Lane lane, const LengthFn& length) {
  LaneState& s = state_.lanes[int(lane)];
  while (s.cursor < docs_) {
    int64_t doc = order_[s.cursor];
    if (in_lane(lane, doc, length) && length(source_, doc) > s.offset) return;
    ++s.cursor;  // another lane's document, or this one is used up (or empty)
    s.offset = 0;
  }
}

bool SourceStream::available(Lane lane, const LengthFn& length) {
  if (threshold_ <= 0 && lane == Lane::long_docs) return false;
  settle(lane, length);
  return state_.lanes[int(lane)].cursor < docs_;
}

Piece SourceStream::take(Lane lane, int64_t max_tokens, const LengthFn& length) {
  ML_CHECK(max_tokens > 0, "a piece needs room for at least one token");
  if (!available(lane, length)) {
    bool other = available(lane == Lane::long_docs ? Lane::short_docs : Lane::long_docs, length);
    ML_CHECK(!other, "take() on a used-up lane while the other lane still has documents");
    new_epoch();  // both lanes are used up
    ML_CHECK(available(lane, length) ||
                 available(lane == Lane::long_docs ? Lane::short_docs : Lane::long_docs, length),
             "a source has no non-empty document");
    if (!available(lane, length))
      lane = lane == Lane::long_docs ? Lane::short_docs : Lane::long_docs;
  }
  LaneState& s = state_.lanes[int(lane)];
  const int64_t doc = order_[s.cursor];
  const int64_t len = length(source_, doc);
  Piece p;
  p.source = source_;
  p.epoch = state_.epoch;
  p.doc = doc;
  p.offset = s.offset;
  p.length = std::min(max_tokens, len - s.offset);
  p.long_lane = lane == Lane::long_docs;
  s.offset += p.length;
  if (s.offset >= len) {
    ++s.cursor;
    s.offset = 0;
  }
  return p;
}

}  // namespace meshloom::dataplane
