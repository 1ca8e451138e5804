// main() for MPI tests: every rank runs the tests; the result is reduced over
// ranks so that any rank's failure fails the test. Only rank 0 prints gtest's
// report; other ranks print their failures. Where no test ran on any rank
// because every one skipped (GPU tests without a GPU), the exit code is 77, so
// that ctest reports the test as skipped rather than passed.
#include <gtest/gtest.h>
#include <mpi.h>

#include "base/check.hpp"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  meshloom::set_process_identity(rank, "test");
  meshloom::set_fatal_handler(meshloom::throwing_fatal_handler);
  ::testing::InitGoogleTest(&argc, argv);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0 && any && !failed) std::fprintf(stderr, "a test failed on another rank\n");
  const auto& unit = *::testing::UnitTest::GetInstance();
  int ran = unit.successful_test_count() + unit.failed_test_count();
  int ran_anywhere = 0;
  MPI_Allreduce(&ran, &ran_anywhere, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  if (any) return 1;
  constexpr int kEverySkipped = 77;
  return ran_anywhere == 0 && unit.skipped_test_count() > 0 ? kEverySkipped : 0;
}
