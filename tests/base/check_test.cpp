#include "base/check.hpp"

#include <gtest/gtest.h>

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
