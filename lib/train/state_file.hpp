// The training state in one checkpoint file, written and read by every
// trainer together (parallel HDF5, ckpt/h5_parallel.hpp): each trainer
// writes only the blocks it owns (train/state_blocks.hpp) and reads only the
// blocks its own layout needs, whatever layout wrote the file. No rank holds
// more than its own shard. The datasets are the whole tensors by name,
// /model/<name> and /optim/m|v/<name>, as ckpt/checkpoint.hpp documents.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>

#include "model/params.hpp"
#include "train/state_blocks.hpp"

namespace meshloom::train {

// One trainer's share of the state: its layout (a TP shard of its stage),
// its data rank among `data_ranks`, and its AdamW range of the layout's
// buffer (the whole buffer without ZeRO-1).
struct StateOwner {
  const model::ParamLayout* layout = nullptr;
  int data_rank = 0, data_ranks = 1;
  int64_t moment_begin = 0, moment_end = 0;
};

// Each dataset's checksum (ckpt/block_checksum.hpp), by dataset path.
using StateChecksums = std::map<std::string, uint64_t>;

// Collective over `trainers` (every trainer once): creates `path` and writes
// the whole state, each trainer its own blocks of `params` (its layout's
// buffer) and of `m` and `v` (its AdamW range). `whole` is the whole model's
// layout. Returns every dataset's checksum on every rank. `wrote`, when
// given, is called after each dataset with the bytes this rank wrote into it
// (what a checkpoint costs each rank; a drill's death mid-write).
using BytesWritten = std::function<void(int64_t bytes)>;
StateChecksums write_state(const std::string& path, MPI_Comm trainers,
                           const model::ParamLayout& whole, const StateOwner& me,
                           std::span<const float> params, std::span<const float> m,
                           std::span<const float> v, const BytesWritten& wrote = {});

// This trainer's own part of the state (StateShare), copied out of its
// buffers: what a background checkpoint writes while training goes on. It
// holds 12 bytes a parameter / data ranks, not the copies every data rank
// keeps. The pieces' offsets point into these vectors (moments: m and v).
struct OwnedState {
  StateShare share;
  std::vector<float> params, m, v;
};
OwnedState copy_owned_state(const StateOwner& me, std::span<const float> params,
                            std::span<const float> m, std::span<const float> v);
// write_state for such a copy: the same file, the same checksums.
StateChecksums write_owned_state(const std::string& path, MPI_Comm trainers,
                                 const model::ParamLayout& whole, const OwnedState& state,
                                 const BytesWritten& wrote = {});

// Collective: reads this trainer's parameters and its AdamW range from
// `path`, verifying every dataset against `expected` (the owners' blocks,
// summed over the trainers). A missing dataset, a shape other than the
// model's or a checksum that differs throws Error naming the file and the
// dataset, on every rank.
void read_state(const std::string& path, MPI_Comm trainers, const model::ParamLayout& whole,
                const StateOwner& me, const StateChecksums& expected, std::span<float> params,
                std::span<float> m, std::span<float> v);

// read_state's parameters alone (model.init): /model from a format 2
// checkpoint or a weights file (ckpt/weights_file.hpp), verified the same way.
void read_params(const std::string& path, MPI_Comm trainers, const model::ParamLayout& whole,
                 const StateOwner& me, const StateChecksums& expected, std::span<float> params);

}  // namespace meshloom::train
