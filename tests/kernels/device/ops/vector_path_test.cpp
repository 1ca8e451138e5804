// The host check that picks the elementwise kernels' 16-byte vector path
// (kernels/device/common/vector_path.hpp): aligned bases and rows a multiple
// of 16 bytes wide, else the scalar path. No GPU needed.
#include "kernels/device/common/vector_path.hpp"

#include <gtest/gtest.h>

#include <cstdint>

namespace meshloom::cuda {
namespace {

const void* at(uintptr_t address) { return reinterpret_cast<const void*>(address); }

TEST(VectorPath, AlignedRowsOfWholeVectors) {
  EXPECT_TRUE(rows_vectorizable(8, 2, {at(0x1000)}));  // 8 bf16
  EXPECT_TRUE(rows_vectorizable(4096, 2, {at(0x1000), at(0x2010)}));
  EXPECT_TRUE(rows_vectorizable(4, 4, {at(0x1000)}));  // 4 floats
}

TEST(VectorPath, RowWidthNotAMultipleOf16Bytes) {
  EXPECT_FALSE(rows_vectorizable(100, 2, {at(0x1000)}));  // 200 bytes
  EXPECT_FALSE(rows_vectorizable(4, 2, {at(0x1000)}));
  EXPECT_FALSE(rows_vectorizable(0, 2, {at(0x1000)}));
}

TEST(VectorPath, AnyMisalignedBase) {
  EXPECT_FALSE(rows_vectorizable(64, 2, {at(0x1002)}));
  EXPECT_FALSE(rows_vectorizable(64, 2, {at(0x1000), at(0x2008)}));
  EXPECT_FALSE(rows_vectorizable(64, 2, {at(0x1000), at(0x2000), at(0x3001)}));
}

}  // namespace
}  // namespace meshloom::cuda
