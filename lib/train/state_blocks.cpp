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

std::vector<StatePiece> pieces_of_range(const model::ParamLayout& layout, int64_t begin,
                                        int64_t end, bool with_copies) {
  std::vector<StatePiece> out;
  for (const model::TensorInfo& t : layout.tensors()) {
    const int64_t lo = std::max(begin, t.offset), hi = std::min(end, t.offset + t.numel);
    if (lo >= hi) continue;
    if (!with_copies && is_copy(layout, t)) continue;
    StatePiece piece{t.name, t.full_shape, {}, lo - begin, hi - lo};
    // The shard's own blocks, moved to where the shard begins in the whole.
    for (ckpt::Block block : ckpt::range_blocks(t.shape, lo - t.offset, hi - t.offset)) {
      if (t.split_dim >= 0) block.start[size_t(t.split_dim)] += t.split_begin;
      piece.blocks.push_back(std::move(block));
    }
    out.push_back(std::move(piece));
  }
  return out;
}

StateShare state_share(const model::ParamLayout& layout, int data_rank, bool zero1,
                       int64_t moment_begin, int64_t moment_end) {
  ML_CHECK(0 <= moment_begin && moment_begin <= moment_end && moment_end <= layout.numel(),
           "state_share: the moment range is not inside the layout");
  StateShare share;
  if (data_rank == 0) share.params = pieces_of_range(layout, 0, layout.numel());
  if (zero1 || data_rank == 0) share.moments = pieces_of_range(layout, moment_begin, moment_end);
  return share;
}

}  // namespace meshloom::train
