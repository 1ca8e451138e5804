// Collective access to one HDF5 file from every rank of a communicator
// (parallel HDF5 over MPI-IO): how a checkpoint is written and read when no
// rank may hold the whole state. HDF5's rule for parallel files holds here:
// every rank calls open, create and close with the same arguments, and every
// rank takes part in each block write or read, moving only its own block
// (a hyperslab: `start` and `count` per dimension; an empty count moves
// nothing). Datasets have at least one dimension: scalars and strings,
// which one rank owns, go through H5File once the collective part is closed.
// Transfers are collective MPI-IO, so the file system sees a few
// large requests instead of one per rank and tensor.
#pragma once

#include <hdf5.h>
#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ckpt/h5.hpp"

namespace meshloom::ckpt {

// A rectangular block of an N-D dataset, row-major.
struct Block {
  std::vector<int64_t> start, count;
  int64_t numel() const;
  // The whole of a dataset of `dims`.
  static Block whole(const std::vector<int64_t>& dims);
};

// The flat elements [first, end) of a row-major dataset of `dims` as
// disjoint blocks in row-major order (at most 2 per dimension but the first,
// plus 1): a partial row, whole rows, a partial row, and so on inward.
std::vector<Block> range_blocks(const std::vector<int64_t>& dims, int64_t first, int64_t end);

class H5ParallelFile {
 public:
  // mode "w": create/truncate; "r": read only. Collective over `comm`.
  // Throws Error naming the path on every rank when the file cannot be opened.
  H5ParallelFile(const std::string& path, const char* mode, MPI_Comm comm);
  ~H5ParallelFile();
  H5ParallelFile(const H5ParallelFile&) = delete;
  H5ParallelFile& operator=(const H5ParallelFile&) = delete;

  // Collective: creates dataset `name` (and its parent groups) of `dims`.
  template <class T>
  void create(const std::string& name, const std::vector<int64_t>& dims) {
    create_raw(name, h5_type<T>(), dims);
  }
  // Collective: this rank's block of `name`, `data` holding block.numel()
  // values in row-major order.
  template <class T>
  void write_block(const std::string& name, const Block& block, const T* data) {
    write_blocks(name, std::vector<Block>{block}, data);
  }
  template <class T>
  void read_block(const std::string& name, const Block& block, T* data) const {
    read_blocks(name, std::vector<Block>{block}, data);
  }
  // The same for several disjoint blocks (none: nothing), listed in the
  // dataset's row-major order, `data` holding their values one after the
  // other: how a flat range of a tensor (a ZeRO shard) lands in it.
  template <class T>
  void write_blocks(const std::string& name, const std::vector<Block>& blocks, const T* data) {
    transfer(name, h5_type<T>(), blocks, const_cast<T*>(data), true);
  }
  template <class T>
  void read_blocks(const std::string& name, const std::vector<Block>& blocks, T* data) const {
    const_cast<H5ParallelFile*>(this)->transfer(name, h5_type<T>(), blocks, data, false);
  }
  // The dataset's dimensions (throws Error naming file and dataset when it
  // is missing).
  std::vector<int64_t> dims(const std::string& name) const;
  bool exists(const std::string& name) const;
  // Collective: closes the file; what was written is in it on every rank's
  // return. Throws Error naming the path where closing fails.
  void close();

 private:
  void create_raw(const std::string& name, hid_t type, const std::vector<int64_t>& dims);
  void transfer(const std::string& name, hid_t type, const std::vector<Block>& blocks, void* data,
                bool write);
  hid_t file_ = -1;
  std::string path_;
};

}  // namespace meshloom::ckpt
