// Collective HDF5 blocks (ckpt/h5_parallel.hpp) and the block checksum
// (ckpt/block_checksum.hpp), on 1, 3 and 4 ranks: what the ranks write as
// column blocks (a TP split), row blocks (ZeRO-style ranges) and uneven
// ranges reads back through the serial reader exactly as the whole tensor,
// any other split reads the same values, and the checksum of any split that
// covers a dataset once is the whole dataset's.
#include "ckpt/h5_parallel.hpp"

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "base/check.hpp"
#include "ckpt/block_checksum.hpp"
#include "ckpt/h5.hpp"
#include "tests/common/mpi_test_util.hpp"

namespace meshloom::ckpt {
namespace {

int world_rank() { return test::rank_of(MPI_COMM_WORLD); }
int world_size() { return test::size_of(MPI_COMM_WORLD); }
std::string shared_path(const char* name) { return test::shared_tmp_path(name); }

float value_at(int64_t flat) { return float(flat) * 0.25f - 7.0f; }

// [first, end) of n split into `parts` uneven ranges: part p gets p + 1
// shares, so no two ranks move the same amount.
std::pair<int64_t, int64_t> uneven_range(int64_t n, int parts, int p) {
  const int64_t shares = int64_t(parts) * (parts + 1) / 2;
  const int64_t before = int64_t(p) * (p + 1) / 2;
  return {n * before / shares, n * (before + p + 1) / shares};
}

// This rank's block of a [rows, cols] matrix cut along dimension `dim`, and
// the values it holds there.
Block matrix_block(int64_t rows, int64_t cols, int dim) {
  const auto [a, b] = uneven_range(dim == 0 ? rows : cols, world_size(), world_rank());
  if (dim == 0) return Block{{a, 0}, {b - a, cols}};
  return Block{{0, a}, {rows, b - a}};
}
std::vector<float> values_of(const std::vector<int64_t>& dims, const Block& block) {
  std::vector<float> out(size_t(block.numel()));
  for_each_run(dims, block, [&](int64_t flat, int64_t offset, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[size_t(offset + i)] = value_at(flat + i);
  });
  return out;
}

uint64_t summed(uint64_t mine) {
  uint64_t total = 0;
  MPI_Allreduce(&mine, &total, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  return total;
}

TEST(H5Parallel, BlocksOfEveryRankMakeTheWholeTensor) {
  const std::string path = shared_path("whole");
  const std::vector<int64_t> dims = {37, 29};
  const std::vector<int64_t> flat = {1001};
  const Block columns = matrix_block(dims[0], dims[1], 1);
  const auto [a, b] = uneven_range(flat[0], world_size(), world_rank());
  const Block range{{a}, {b - a}};
  {
    H5ParallelFile f(path, "w", MPI_COMM_WORLD);
    f.create<float>("/model/layers.0.w", dims);
    f.create<float>("/optim/m/flat", flat);
    f.write_block("/model/layers.0.w", columns, values_of(dims, columns).data());
    f.write_block("/optim/m/flat", range, values_of(flat, range).data());
    f.close();
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) {
    H5File serial(path, "r");
    EXPECT_EQ(serial.read<float>("/model/layers.0.w"), values_of(dims, Block::whole(dims)));
    EXPECT_EQ(serial.read<float>("/optim/m/flat"), values_of(flat, Block::whole(flat)));
  }
  // Read back in another split: rows instead of columns.
  {
    H5ParallelFile f(path, "r", MPI_COMM_WORLD);
    EXPECT_EQ(f.dims("/model/layers.0.w"), dims);
    const Block rows = matrix_block(dims[0], dims[1], 0);
    std::vector<float> got(size_t(rows.numel()));
    f.read_block("/model/layers.0.w", rows, got.data());
    EXPECT_EQ(got, values_of(dims, rows));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) std::remove(path.c_str());
}

TEST(H5Parallel, ARankWithNothingTakesPartAndMovesNothing) {
  const std::string path = shared_path("empty");
  const std::vector<int64_t> dims = {5, 3};
  // Only the last rank writes, the whole tensor.
  const bool last = world_rank() == world_size() - 1;
  const Block mine = last ? Block::whole(dims) : Block{{0, 0}, {0, 3}};
  {
    H5ParallelFile f(path, "w", MPI_COMM_WORLD);
    f.create<float>("/t", dims);
    f.write_block("/t", mine, values_of(dims, mine).data());
    f.close();
  }
  H5ParallelFile f(path, "r", MPI_COMM_WORLD);
  std::vector<float> got(size_t(mine.numel()));
  f.read_block("/t", mine, got.data());
  EXPECT_EQ(got, values_of(dims, mine));
  f.close();
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) std::remove(path.c_str());
}

TEST(H5Parallel, AMissingFileOrDatasetIsNamedOnEveryRank) {
  const std::string path = shared_path("missing");
  try {
    H5ParallelFile f(path, "r", MPI_COMM_WORLD);
    FAIL() << "opened a missing file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  {
    H5ParallelFile f(path, "w", MPI_COMM_WORLD);
    try {
      f.dims("/model/absent");
      FAIL() << "found an absent dataset";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("/model/absent"), std::string::npos) << e.what();
    }
    f.close();
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) std::remove(path.c_str());
}

TEST(RangeBlocks, CoverTheRangeInOrderAndNothingElse) {
  const std::vector<int64_t> dims = {7, 5, 3};
  const int64_t n = 7 * 5 * 3;
  for (int64_t first = 0; first <= n; ++first)
    for (int64_t end = first; end <= n; ++end) {
      std::vector<int64_t> seen;
      for (const Block& b : range_blocks(dims, first, end)) {
        ASSERT_GT(b.numel(), 0);
        for_each_run(dims, b, [&](int64_t flat, int64_t, int64_t len) {
          for (int64_t i = 0; i < len; ++i) seen.push_back(flat + i);
        });
      }
      ASSERT_EQ(int64_t(seen.size()), end - first) << first << ".." << end;
      for (int64_t i = first; i < end; ++i) ASSERT_EQ(seen[size_t(i - first)], i);
    }
}

TEST(H5Parallel, FlatRangesOfEveryRankMakeTheWholeTensor) {
  // A ZeRO-1 shard: each rank's uneven flat range, written as the blocks it
  // makes, read back through the serial reader and checksummed by parts.
  const std::string path = shared_path("ranges");
  const std::vector<int64_t> dims = {13, 7, 5};
  const auto [a, b] = uneven_range(13 * 7 * 5, world_size(), world_rank());
  const std::vector<Block> mine = range_blocks(dims, a, b);
  std::vector<float> data;
  for (int64_t i = a; i < b; ++i) data.push_back(value_at(i));
  {
    H5ParallelFile f(path, "w", MPI_COMM_WORLD);
    f.create<float>("/optim/v/t", dims);
    f.write_blocks("/optim/v/t", mine, data.data());
    f.close();
  }
  const Block whole = Block::whole(dims);
  const std::vector<float> all = values_of(dims, whole);
  EXPECT_EQ(summed(block_checksum(dims, mine, data.data())),
            block_checksum(dims, whole, all.data()));
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) {
    EXPECT_EQ(H5File(path, "r").read<float>("/optim/v/t"), all);
  }
  H5ParallelFile f(path, "r", MPI_COMM_WORLD);
  std::vector<float> got(data.size());
  f.read_blocks("/optim/v/t", mine, got.data());
  EXPECT_EQ(got, data);
  f.close();
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) std::remove(path.c_str());
}

TEST(BlockChecksum, AnySplitThatCoversTheDatasetOnceGivesTheWholeSum) {
  const std::vector<int64_t> dims = {23, 4, 11};
  const Block whole = Block::whole(dims);
  const uint64_t expected = block_checksum(dims, whole, values_of(dims, whole).data());
  for (int dim = 0; dim < 3; ++dim) {
    const auto [a, b] = uneven_range(dims[size_t(dim)], world_size(), world_rank());
    Block mine = whole;
    mine.start[size_t(dim)] = a;
    mine.count[size_t(dim)] = b - a;
    EXPECT_EQ(summed(block_checksum(dims, mine, values_of(dims, mine).data())), expected)
        << "split along dimension " << dim;
  }
}

TEST(BlockChecksum, AFlippedBitOrSwappedElementsChangeTheSum) {
  const std::vector<int64_t> dims = {64};
  const Block whole = Block::whole(dims);
  const std::vector<float> good = values_of(dims, whole);
  const uint64_t sum = block_checksum(dims, whole, good.data());
  std::vector<float> bad = good;
  uint32_t bits = 0;
  std::memcpy(&bits, &bad[17], 4);
  bits ^= 1u << 9;
  std::memcpy(&bad[17], &bits, 4);
  EXPECT_NE(block_checksum(dims, whole, bad.data()), sum);
  bad = good;
  std::swap(bad[3], bad[40]);
  EXPECT_NE(block_checksum(dims, whole, bad.data()), sum);
  EXPECT_NE(block_checksum(dims, whole, std::vector<float>(64, 0.0f).data()), sum);
}

}  // namespace
}  // namespace meshloom::ckpt
