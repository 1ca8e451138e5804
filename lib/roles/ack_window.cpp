#include "roles/ack_window.hpp"

#include <string>

#include "base/check.hpp"
#include "base/strings.hpp"
#include "comm/p2p.hpp"

namespace meshloom::roles {

void AckWindow::open() {
  acks_.emplace_back();
  count_.push_back(0);
}

int64_t AckWindow::completed() const {
  int64_t c = 0;
  while (c < int64_t(count_.size()) && count_[size_t(c)] == w_.layout.trainers) ++c;
  return first_ + c;
}

void AckWindow::receive() {
  // Named in the message if the wait times out: who the oldest open step lacks.
  auto what = [this] {
    std::string text = "a trainer's acknowledgement";
    const size_t i = size_t(completed() - first_);
    if (i >= count_.size()) return text;
    std::vector<bool> got(size_t(w_.layout.trainers), false);
    for (const wire::Ack& a : acks_[i]) got[size_t(a.trainer)] = true;
    std::string missing;
    for (int t = 0; t < w_.layout.trainers; ++t)
      if (!got[size_t(t)])
        missing += strf("%strainer %d = rank %d", missing.empty() ? "" : ", ", t,
                        w_.layout.first_rank(parallel::Role::trainer) + t);
    return text + strf(" (step %lld still waits for %s)", (long long)(first_ + int64_t(i)),
                       missing.c_str());
  };
  int from = -1;
  std::string msg = comm::recv_bytes(MPI_ANY_SOURCE, wire::kAck, MPI_COMM_WORLD,
                                     w_.config.run.timeout, what, &from);
  wire::Ack ack = wire::decode_ack(msg, from);
  const int64_t i = ack.step - first_;
  ML_CHECK(i >= 0 && i < int64_t(acks_.size()), "ack for an unknown step");
  ++count_[size_t(i)];
  acks_[size_t(i)].push_back(std::move(ack));
}

void AckWindow::drain() {
  while (completed() < first_ + int64_t(count_.size())) receive();
}

std::vector<wire::Ack> AckWindow::take(int64_t step) {
  return std::move(acks_.at(size_t(step - first_)));
}

}  // namespace meshloom::roles
