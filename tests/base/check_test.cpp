#include "base/check.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "tests/common/test_util.hpp"

using namespace meshloom;

TEST(Check, FailGoesThroughTheHandlerWithFileAndLine) {
  test::ThrowOnFatal guard;
  set_process_identity(3, "loader");
  try {
    ML_CHECK(1 + 1 == 3, "arithmetic");
    FAIL() << "ML_CHECK did not fail";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("check_test.cpp:"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[rank 3 "), std::string::npos) << msg;
    EXPECT_NE(msg.find("arithmetic"), std::string::npos) << msg;
  }
  set_process_identity(-1, "");
}

TEST(Check, PassingCheckDoesNothing) {
  test::ThrowOnFatal guard;
  EXPECT_NO_THROW(ML_CHECK(2 > 1, "never"));
}

// mpi_start's start-up guard thread (lib/parallel/world.cpp) runs before
// MPI_Init and reads the rank (record_exit) when it fires, while the main
// thread sets the rank after MPI_Init: a data race under TSan
// (scripts/test.sh --sanitize thread) while the rank was a plain int.
TEST(Check, ProcessRankIsReadableFromAnotherThreadWhileSet) {
  std::atomic<bool> go{false};
  std::thread reader([&] {
    while (!go) {
    }
    for (int i = 0; i < 1000; ++i) EXPECT_GE(process_rank(), -1);
  });
  go = true;
  for (int i = 0; i < 1000; ++i) set_process_identity(i % 4, "test");
  reader.join();
  EXPECT_EQ(process_rank(), 3);
}
