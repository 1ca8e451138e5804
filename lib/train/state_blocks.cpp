#include "train/state_blocks.hpp"

#include <algorithm>

#include "base/check.hpp"

namespace meshloom::train {

namespace {
// A tensor this trainer holds as a copy of another trainer's: the tied
// embedding off the first stage, or one TP does not split (norm gains,
// patch_embed) on TP ranks other than 0.
bool is_copy(const model::ParamLayout& layout, const model::TensorInfo& t) {
  if (t.kind == model::TensorKind::embed && !layout.first_stage()) return true;
  return t.split_dim < 0 && layout.shard().rank != 0;
}
}  // namespace

std::pair<int64_t, int64_t> zero_range(int64_t n, int rank, int size) {
  const int64_t part = (n + size - 1) / size;
  const int64_t first = std::min<int64_t>(n, part * rank);
  return {first, std::min<int64_t>(n, first + part)};
}

std::vector<StatePiece> pieces_of_range(const model::ParamLayout& layout, int64_t begin,
                                        int64_t end, int64_t base, bool with_copies) {
  ML_CHECK(base <= begin, "pieces_of_range: the buffer starts after the range");
  std::vector<StatePiece> out;
  for (const model::TensorInfo& t : layout.tensors()) {
    const int64_t lo = std::max(begin, t.offset), hi = std::min(end, t.offset + t.numel);
    if (lo >= hi) continue;
    if (!with_copies && is_copy(layout, t)) continue;
    StatePiece piece{t.name, t.full_shape, {}, lo - base, hi - lo};
    // The shard's own blocks, moved to where the shard begins in the whole.
    for (ckpt::Block block : ckpt::range_blocks(t.shape, lo - t.offset, hi - t.offset)) {
      if (t.split_dim >= 0) block.start[size_t(t.split_dim)] += t.split_begin;
      piece.blocks.push_back(std::move(block));
    }
    out.push_back(std::move(piece));
  }
  return out;
}

StateShare state_share(const model::ParamLayout& layout, int data_rank, int data_ranks,
                       int64_t moment_begin, int64_t moment_end) {
  const auto [first, end] = zero_range(layout.numel(), data_rank, data_ranks);
  ML_CHECK(moment_begin <= first && end <= moment_end && moment_end <= layout.numel(),
           "state_share: the moments held do not cover the data rank's range");
  return StateShare{pieces_of_range(layout, first, end, 0),
                    pieces_of_range(layout, first, end, moment_begin)};
}

}  // namespace meshloom::train
