// Where a trainer's part of the training state lies in a checkpoint's whole
// tensors (/model/<name> and /optim/m|v/<name>, ckpt/checkpoint.hpp): the
// blocks its TP shard of its pipeline stage makes in each whole tensor, and
// the offsets of their values in its own buffers. Every element of the
// whole state has exactly one owner, so the trainers can write one file
// together, each only its own part, and the block checksums they add up are
// the whole dataset's (ckpt/block_checksum.hpp):
//   - the data ranks, which hold the same weights (and without ZeRO-1 the
//     same moments), split them as ZeRO-1 splits the moments: data rank r
//     owns its range of the flat buffer (zero_range), so every trainer
//     writes the same share of the state, 12 bytes a parameter / trainers;
//   - a tied embedding, which the last stage holds too, is the first
//     stage's; a tensor TP does not split (norm gains), which every TP rank
//     holds, is TP rank 0's.
// Pure: no MPI, no file.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ckpt/h5_parallel.hpp"
#include "model/params.hpp"

namespace meshloom::train {

// One tensor's share: blocks of the whole tensor `name` (of `dims`), in its
// row-major order, whose values lie at [offset, offset + numel) of the
// trainer's buffer, one after the other.
struct StatePiece {
  std::string name;
  std::vector<int64_t> dims;
  std::vector<ckpt::Block> blocks;
  int64_t offset = 0, numel = 0;
};

// Data rank `rank`'s range [first, end) of a buffer of n elements split
// over `size` data ranks: ZeRO-1's split of the moments, and the split of
// what every data rank holds when writing a checkpoint.
std::pair<int64_t, int64_t> zero_range(int64_t n, int rank, int size);

// The pieces of the layout's flat elements [begin, end) (a TP shard of a
// stage, or the whole model), tensor by tensor in the layout's order;
// offsets count from `base` (<= begin: where the trainer's buffer starts). `with_copies` keeps what
// the trainer holds as a copy of another's (see above): what it reads on resume, not what it owns.
std::vector<StatePiece> pieces_of_range(const model::ParamLayout& layout, int64_t begin,
                                        int64_t end, int64_t base, bool with_copies = false);

// What one trainer owns of the state (see above): its parameters' pieces
// (offsets into its parameter buffer) and its moments' (offsets into its
// AdamW range [moment_begin, moment_end) of that buffer, which must hold
// the data rank's zero_range).
struct StateShare {
  std::vector<StatePiece> params, moments;
};
StateShare state_share(const model::ParamLayout& layout, int data_rank, int data_ranks,
                       int64_t moment_begin, int64_t moment_end);

}  // namespace meshloom::train
