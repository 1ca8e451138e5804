#include "roles/inbox.hpp"

#include "base/clock.hpp"
#include "comm/p2p.hpp"
#include "roles/constructor.hpp"

namespace meshloom::roles {

BatchInbox::BatchInbox(const parallel::World& w) : w_(w) {}
BatchInbox::~BatchInbox() = default;

int64_t BatchInbox::worker_pss_kib() const { return workers_ ? workers_->pss_kib() : 0; }

wire::Batch BatchInbox::receive(double* wait_seconds) {
  const parallel::World& w = w_;
  const auto start = Clock::now();
  wire::Batch b;
  if (w.config.data.mode == config::DataMode::colocated && w.config.data.colocated_processes > 0) {
    // DataLoader-style: worker processes build the batches. Keep each busy
    // with a step the lead has already sent (the lead runs data.prefetch
    // steps ahead), as a DataLoader prefetches.
    if (!workers_) workers_ = std::make_unique<sources::DataWorkerPool>(w.config, w.rank);
    const double timeout = w.config.run.timeout;
    int from = -1, tag = -1;
    while (workers_->in_flight() == 0 ||
           (workers_->in_flight() < workers_->size() &&
            comm::poll_message(0, wire::kStepWork, MPI_COMM_WORLD, &from, &tag)))
      workers_->submit(
          comm::recv_bytes(0, wire::kStepWork, MPI_COMM_WORLD, timeout, "step work from the lead"));
    b = wire::decode_batch(workers_->take(timeout));
  } else if (w.config.data.mode == config::DataMode::colocated) {
    // Per-rank data loading: this trainer opens every source itself.
    b = local_batch(
        w.config,
        wire::decode_step_work(comm::recv_bytes(0, wire::kStepWork, MPI_COMM_WORLD,
                                                w.config.run.timeout, "step work from the lead"),
                               0),
        &local_);
  } else {
    const int constructor = w.mesh.hdp_rank_of(w.role_index) % w.layout.constructors;
    b = wire::decode_batch(comm::recv_bytes(constructor, wire::kBatch, MPI_COMM_WORLD,
                                            w.config.run.timeout, "a batch from its constructor"),
                           constructor);
  }
  if (wait_seconds) *wait_seconds = seconds_since(start);
  return b;
}

void send_ack(const wire::Ack& ack) {
  comm::send_bytes(wire::encode(ack), 0, wire::kAck, MPI_COMM_WORLD);
}

}  // namespace meshloom::roles
