#include "base/check.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <new>
#include <stdexcept>
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

TEST(Check, TimeoutEndsWithExitCode3) {
  test::ThrowOnFatal guard;
  try {
    ML_TIMEOUT("waited 5 s for rank 2");
    FAIL() << "ML_TIMEOUT did not fail";
  } catch (const Timeout& e) {
    EXPECT_EQ(e.exit_code(), kExitTimeout);
    EXPECT_EQ(fatal_exit_code(), kExitTimeout);
  }
  try {
    ML_CHECK(false, "a bug");  // the code is the last failure's, not sticky
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), kExitFatal);
  }
}

// The one map from an exception to what the process prints and exits with.
TEST(Check, FailureOfGivesMessageAndExitCode) {
  auto of = [](auto thrown) { return failure_of(std::make_exception_ptr(thrown)); };
  EXPECT_EQ(of(Error("bad key")).exit_code, kExitBadInput);
  EXPECT_EQ(of(Error("bad key")).message, "bad key");
  EXPECT_EQ(of(Timeout("waited")).exit_code, kExitTimeout);
  EXPECT_EQ(of(std::runtime_error("lost")).exit_code, kExitFatal);
  EXPECT_EQ(of(std::runtime_error("lost")).message, "lost");
  const Failure oom = of(std::bad_alloc());
  EXPECT_EQ(oom.exit_code, kExitFatal);
  EXPECT_NE(oom.message.find("out of host memory"), std::string::npos) << oom.message;
  EXPECT_EQ(of(42).exit_code, kExitFatal);
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
