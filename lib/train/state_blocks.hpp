// Where a trainer's part of the training state lies in a checkpoint's whole
// tensors (/model/<name> and /optim/m|v/<name>, ckpt/checkpoint.hpp): the
// blocks its TP shard of its pipeline stage makes in each whole tensor, and
// the offsets of their values in its own buffers. Every element of the
// whole state has exactly one owner, so the trainers can write one file
// together, each only its own part, and the block checksums they add up are
// the whole dataset's (ckpt/block_checksum.hpp):
//   - parameters: the trainers of data rank 0 (data-parallel replicas hold
//     the same values); a tied embedding, which the last stage holds too, is
//     the first stage's; a tensor TP does not split (norm gains), which
//     every TP rank holds, is TP rank 0's;
//   - AdamW moments: with ZeRO-1 each data rank owns its flat range of the
//     shard (every trainer writes), without it data rank 0, as above.
// Pure: no MPI, no file.
#pragma once

#include <cstdint>
#include <string>
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

// The pieces of the layout's flat elements [begin, end) (a TP shard of a
// stage, or the whole model), tensor by tensor in the layout's order;
// offsets count from `begin`. `with_copies` keeps what the trainer holds as
// a copy of another's (see above): what it reads on resume, not what it owns.
std::vector<StatePiece> pieces_of_range(const model::ParamLayout& layout, int64_t begin,
                                        int64_t end, bool with_copies = false);

// What one trainer owns of the state (see above): its parameters' pieces
// (offsets into its parameter buffer) and its moments' (offsets into its
// AdamW range [moment_begin, moment_end) of that buffer).
struct StateShare {
  std::vector<StatePiece> params, moments;
};
StateShare state_share(const model::ParamLayout& layout, int data_rank, bool zero1,
                       int64_t moment_begin, int64_t moment_end);

}  // namespace meshloom::train
