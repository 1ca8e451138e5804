// A checksum that ranks can compute on their own blocks and add up: the sum
// (mod 2^64) over a dataset's elements of mix(flat index, element bits). Any
// set of blocks that covers the dataset once gives the same sum, whatever
// the layout that wrote or reads it, so a checkpoint written by 8 trainers
// is verified by 6 without any rank reading a whole tensor. A flipped bit
// changes one term, and with it the sum; zeroed or shifted data change many.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "base/random.hpp"
#include "ckpt/h5_parallel.hpp"

namespace meshloom::ckpt {

// One element's term: its bits mixed with its flat index in the dataset.
inline uint64_t element_term(int64_t flat_index, uint64_t bits) {
  return mix64(splitmix64(uint64_t(flat_index)) ^ bits);
}

// Calls f(flat index of the run's first element, offset of the run in the
// block's data, run length) for each contiguous run of `block` (one per
// position of all but the last dimension) in a dataset of `dims`.
template <class F>
void for_each_run(const std::vector<int64_t>& dims, const Block& block, F f) {
  const size_t rank = dims.size();
  if (rank == 0 || block.numel() == 0) return;
  std::vector<int64_t> at(rank - 1, 0);  // position inside the block, outer dimensions
  const int64_t run = block.count[rank - 1];
  for (int64_t offset = 0;; offset += run) {
    int64_t flat = 0;
    for (size_t d = 0; d < rank; ++d)
      flat = flat * dims[d] + block.start[d] + (d + 1 < rank ? at[d] : 0);
    f(flat, offset, run);
    size_t d = rank - 1;
    while (d > 0 && ++at[d - 1] == block.count[d - 1]) at[--d] = 0;
    if (d == 0) return;
  }
}

// The block's share of the dataset's checksum; `data` holds block.numel()
// elements (at most 8 bytes each) in row-major order.
template <class T>
uint64_t block_checksum(const std::vector<int64_t>& dims, const Block& block, const T* data) {
  static_assert(sizeof(T) <= sizeof(uint64_t), "elements of at most 8 bytes");
  uint64_t sum = 0;
  for_each_run(dims, block, [&](int64_t flat, int64_t offset, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      uint64_t bits = 0;
      std::memcpy(&bits, data + offset + i, sizeof(T));
      sum += element_term(flat + i, bits);
    }
  });
  return sum;
}

// The same for disjoint blocks whose values lie one after the other in `data`.
template <class T>
uint64_t block_checksum(const std::vector<int64_t>& dims, const std::vector<Block>& blocks,
                        const T* data) {
  uint64_t sum = 0;
  for (const Block& block : blocks) {
    sum += block_checksum(dims, block, data);
    data += block.numel();
  }
  return sum;
}

}  // namespace meshloom::ckpt
