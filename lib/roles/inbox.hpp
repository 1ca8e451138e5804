// A trainer's side of the data path: its batches come in from its
// constructor (or, colocated, from its own sources or from DataLoader-style
// worker processes), its acknowledgements go out to the lead.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "parallel/world.hpp"
#include "sources/data_workers.hpp"
#include "sources/doc_source.hpp"
#include "wire/protocol.hpp"

namespace meshloom::roles {

class BatchInbox {
 public:
  explicit BatchInbox(const parallel::World& w);
  ~BatchInbox();
  BatchInbox(const BatchInbox&) = delete;
  BatchInbox& operator=(const BatchInbox&) = delete;

  // The next batch; *wait_seconds gets the time spent waiting for it.
  wire::Batch receive(double* wait_seconds = nullptr);
  // The proportional set size of its data worker processes now, KiB (0: none).
  int64_t worker_pss_kib() const;

 private:
  const parallel::World& w_;
  std::unique_ptr<sources::DataWorkerPool> workers_;        // data.colocated_processes > 0
  std::vector<std::unique_ptr<sources::DocSource>> local_;  // colocated, read in this process
};

// The trainer's answer to the lead for a step.
void send_ack(const wire::Ack& ack);

}  // namespace meshloom::roles
