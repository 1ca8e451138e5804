// The lead's ack window: the acks of every dispatched step, counted until
// every trainer's has come, and taken out in step order.
#pragma once

#include <cstdint>
#include <vector>

#include "parallel/world.hpp"
#include "wire/protocol.hpp"

namespace meshloom::roles {

class AckWindow {
 public:
  explicit AckWindow(const parallel::World& w) : w_(w) {}
  // Steps start at `step` (a resumed run); before the first open().
  void start_at(int64_t step) { first_ = step; }
  // A step was dispatched: its acks may come.
  void open();
  // Steps whose every trainer has acknowledged, counted from step 0.
  int64_t completed() const;
  // Blocks for one ack (run.timeout; the message names whom the oldest open
  // step waits for).
  void receive();
  // Waits for the acks of every opened step.
  void drain();
  // The acks of step s in arrival order; valid once the step is completed.
  std::vector<wire::Ack> take(int64_t step);

 private:
  const parallel::World& w_;
  int64_t first_ = 0;
  std::vector<std::vector<wire::Ack>> acks_;  // per step, until taken
  std::vector<int> count_;                    // per step
};

}  // namespace meshloom::roles
