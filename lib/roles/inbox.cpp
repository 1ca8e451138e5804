#include "roles/inbox.hpp"

#include "base/clock.hpp"
#include "comm/p2p.hpp"
#include "roles/constructor.hpp"

namespace meshloom {

BatchInbox::BatchInbox(const World& w) : w_(w) {}
BatchInbox::~BatchInbox() = default;

int64_t BatchInbox::worker_pss_kib() const { return workers_ ? workers_->pss_kib() : 0; }

proto::Batch BatchInbox::receive(double* wait_seconds) {
  const World& w = w_;
  const auto start = Clock::now();
  proto::Batch b;
  if (w.config.data.mode == config::DataMode::colocated && w.config.data.colocated_processes > 0) {
    // DataLoader-style: worker processes build the batches. Keep each busy
    // with a step the lead has already sent (the lead runs data.prefetch
    // steps ahead), as a DataLoader prefetches.
    if (!workers_) workers_ = std::make_unique<DataWorkerPool>(w.config, w.rank);
    const double timeout = w.config.run.timeout;
    int from = -1, tag = -1;
    while (workers_->in_flight() == 0 ||
           (workers_->in_flight() < workers_->size() &&
            poll_message(0, proto::kStepWork, MPI_COMM_WORLD, &from, &tag)))
      workers_->submit(
          recv_bytes(0, proto::kStepWork, MPI_COMM_WORLD, timeout, "step work from the lead"));
    b = proto::decode_batch(workers_->take(timeout));
  } else if (w.config.data.mode == config::DataMode::colocated) {
    // Per-rank data loading: this trainer opens every source itself.
    b = local_batch(
        w.config,
        proto::decode_step_work(recv_bytes(0, proto::kStepWork, MPI_COMM_WORLD,
                                           w.config.run.timeout, "step work from the lead"),
                                0),
        &local_);
  } else {
    const int constructor = w.mesh.hdp_rank_of(w.role_index) % w.layout.constructors;
    b = proto::decode_batch(recv_bytes(constructor, proto::kBatch, MPI_COMM_WORLD,
                                       w.config.run.timeout, "a batch from its constructor"),
                            constructor);
  }
  if (wait_seconds) *wait_seconds = seconds_since(start);
  return b;
}

void send_ack(const proto::Ack& ack) {
  send_bytes(proto::encode(ack), 0, proto::kAck, MPI_COMM_WORLD);
}

}  // namespace meshloom
