// PendingSend under real MPI. Under ASan (scripts/test.sh --sanitize address)
// these are the regression tests of the leak LeakSanitizer found at every
// loader's exit: abandon() released the buffer of every send it gave up on,
// finished or not.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "base/check.hpp"
#include "comm/p2p.hpp"
#include "tests/common/mpi_test_util.hpp"

namespace meshloom::comm {
namespace {

using test::rank_of;
using test::size_of;

// A send abandoned before its peer receives: the buffer must stay readable
// (MPI still reads it; ASan's memcpy check sees a freed one) and is not lost.
TEST(PendingSend, AbandonedSendStillDeliversItsBytes) {
  const int rank = rank_of(MPI_COMM_WORLD), size = size_of(MPI_COMM_WORLD);
  const int peer = rank ^ 1;
  if (peer >= size) GTEST_SKIP() << "an odd rank count leaves this rank without a peer";
  // Large enough for a rendezvous send: incomplete until the peer receives.
  std::string payload(1 << 20, char('a' + rank));
  {
    PendingSend send(payload, peer, 7, MPI_COMM_WORLD);
    send.abandon();
  }  // the object is gone before the peer has received anything
  MPI_Barrier(MPI_COMM_WORLD);
  std::string got = recv_bytes(peer, 7, MPI_COMM_WORLD, 60.0, "the abandoned send");
  ASSERT_EQ(got.size(), payload.size());
  EXPECT_EQ(got, std::string(payload.size(), char('a' + peer)));
  MPI_Barrier(MPI_COMM_WORLD);
}

// A send that completed before abandon() frees its buffer as usual.
TEST(PendingSend, AbandonAfterCompletionFreesTheBuffer) {
  const int rank = rank_of(MPI_COMM_WORLD), size = size_of(MPI_COMM_WORLD);
  const int peer = rank ^ 1;
  if (peer >= size) GTEST_SKIP() << "an odd rank count leaves this rank without a peer";
  std::vector<PendingSend> sends;
  for (int i = 0; i < 8; ++i)
    sends.emplace_back(std::string(100 + i, 'x'), peer, 8, MPI_COMM_WORLD);
  for (int i = 0; i < 8; ++i) {
    std::string got = recv_bytes(peer, 8, MPI_COMM_WORLD, 60.0, "a small send");
    EXPECT_EQ(got.size(), size_t(100 + i));
  }
  MPI_Barrier(MPI_COMM_WORLD);  // every send has been received
  for (auto& s : sends) {
    while (!s.done()) {
    }
    s.abandon();
  }
}

// wait_requests on a collective that one rank joins late: the others fail
// with a message naming what they waited for, then finish the call.
TEST(WaitRequests, FailsNamingWhatItWaitedFor) {
  const int rank = rank_of(MPI_COMM_WORLD);
  MPI_Request req;
  if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(800));
  MPI_Ibarrier(MPI_COMM_WORLD, &req);
  if (rank != 0) {
    try {
      wait_requests(&req, 1, 0.2, [] { return std::string("the late barrier"); });
      ADD_FAILURE() << "no timeout";
    } catch (const Timeout& e) {
      EXPECT_NE(std::string(e.what()).find("for the late barrier"), std::string::npos) << e.what();
      EXPECT_EQ(e.exit_code(), kExitTimeout);
    }
  }
  MPI_Wait(&req, MPI_STATUS_IGNORE);
}

}  // namespace
}  // namespace meshloom::comm
