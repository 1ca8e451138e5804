// Checkpoints: one HDF5 file per checkpoint, everything needed to continue a
// run exactly where it stopped.
//
//   /meta/format          int32    1 or 2 (below)
//   /meta/step            int64    the last completed step (training resumes at step + 1)
//   /meta/trainers        int32    trainers at save time (resume may use another count)
//   /meta/seed            int64    run.seed (all randomness is counter-based on it)
//   /meta/config          string   the effective config
//   /model/<name>         float32  parameters, shaped as docs/design.md "The model" names them
//   /optim/m/<name>, /optim/v/<name>  float32  AdamW moments (ZeRO-1 shards gathered)
//   /optim/step           int64    AdamW's step count (bias correction)
//   /data/plane           uint8    the data plane's state after choosing step `step`
//   /data/lengths/kind    string   "full" or "delta"
//   /data/lengths/base    string   for a delta: the file holding the full lengths
//   /data/lengths/<source>/docs, /lengths  int64  document lengths learned from loaders
//   /checksums/<dataset path with '/' as '|'>  uint64  checksum() of the dataset's bytes
//
// Format 2 is the same file, written by every trainer at once: each writes
// its own blocks of the model and optim/m|v tensors (train/state_file.hpp,
// parallel HDF5), then trainer 0 adds the rest. The tensors' checksums are
// block checksums (ckpt/block_checksum.hpp), which any layout can add up from
// its own blocks; every other dataset keeps checksum(). Format 1 files are
// written by one trainer holding the whole state (checkpoint.collective:
// false), and both formats are read.
//
// Document lengths are a cache (loaders can always recompute them) that saves
// re-tokenizing raw sources on resume; they are stored in full every
// checkpoint.full_every checkpoints and as deltas (new lengths only) in
// between. Everything else is stored in full, every time.
//
// Writing is atomic: the file is written as NAME.tmp, flushed to disk, then
// renamed. Reading verifies every checksum; a truncated file, a flipped byte
// or a missing dataset throws meshloom::Error with the file and the dataset.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace meshloom::ckpt {

class H5File;

struct SourceLengths {
  std::string source;
  std::vector<int64_t> docs, lengths;
  std::vector<int64_t> images;  // image-text sources: image positions per doc; else empty
};

struct Tensor {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0, numel = 0;  // into the flat buffers
};

struct Checkpoint {
  int32_t format = 1;
  int64_t step = 0;
  int32_t trainers = 0;
  int64_t seed = 0;
  std::string config;
  std::vector<Tensor> tensors;
  std::vector<float> params, m, v;  // flat, tensors' order
  int64_t adam_step = 0;
  std::string plane;  // serialized data plane state
  bool lengths_full = true;
  std::string lengths_base;
  std::vector<SourceLengths> lengths;
  // The lead's replay of the trainers' group-communicator cache after the
  // step (member sets, least recently used first): a resumed run's planner
  // prefers the same sets as the uninterrupted run's (plan/cache_relabel.hpp).
  std::vector<std::vector<int32_t>> group_sets;
  // Format 2: each tensor dataset's block checksum, by its path
  // ("model/<name>", "optim/m/<name>", "optim/v/<name>").
  std::map<std::string, uint64_t> tensor_sums;
};

// "DIR/step_00000042.h5"
std::string checkpoint_path(const std::string& dir, int64_t step);

// The step a checkpoint's file name gives ("step_00000042.h5": 42), -1 for another name.
int64_t checkpoint_step(const std::string& path);

// Writes atomically (NAME.tmp, fsync, rename). Returns the bytes written.
int64_t write_checkpoint(const std::string& path, const Checkpoint& c);

// Format 2: the tensors are in `tmp` already (every trainer wrote its
// blocks); adds the rest of `c` and every checksum (c.tensor_sums for the
// tensors), makes the file durable and renames it to `path`. Returns the
// bytes of the file.
int64_t finish_checkpoint(const std::string& tmp, const std::string& path, const Checkpoint& c);

// Reads and verifies; with only_meta, reads meta/data/lengths but not the
// model and optimizer (for the lead), still verifying every checksum.
Checkpoint read_checkpoint(const std::string& path, bool only_meta = false);

// Format 2: everything but the tensors, verified, and the tensors'
// checksums (c.tensor_sums), which the trainers that read their blocks
// verify (train/state_file.hpp). The tensors are not read.
Checkpoint read_checkpoint_meta(const std::string& path);

// Only /meta/config, verified against its checksum.
std::string read_checkpoint_config(const std::string& path);

// Checks a file without keeping it: "" when good, else the problem.
std::string verify_checkpoint(const std::string& path);

// Checkpoint files in `dir`, newest first.
std::vector<std::string> list_checkpoints(const std::string& dir);

// Removes all but the newest `keep` of the checkpoints that `ours` accepts,
// never a full-lengths file that a kept delta refers to. What `ours` rejects
// (another run's files, unreadable ones) is neither counted nor removed.
using IsOurs = std::function<bool(const std::string& path)>;
void prune_checkpoints(const std::string& dir, int64_t keep, const IsOurs& ours);

// "checksums/model|layers.0.wq": where dataset "model/layers.0.wq"'s checksum lies.
std::string checksum_dataset(const std::string& dataset);

// A string dataset of `f` (the file at `path`), verified against checksum().
std::string read_verified_string(const H5File& f, const std::string& path, const std::string& name);
// A float32 tensor dataset, verified against its block checksum (format 2).
std::vector<float> read_verified_tensor(const H5File& f, const std::string& path,
                                        const std::string& name);

// Makes NAME.tmp durable (fsync) before renaming it to `path`, so that the
// name exists only for a whole file. Returns the file's bytes.
int64_t make_durable(const std::string& tmp, const std::string& path);

uint64_t fnv1a(const void* data, size_t n, uint64_t h = 1469598103934665603ULL);
// The datasets' checksum: FNV-1a over 64-bit little-endian words (the last
// one zero-padded), then mixed with the byte count.
uint64_t checksum(const void* data, size_t n);

}  // namespace meshloom::ckpt
