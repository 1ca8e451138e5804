#include "runtime/step_loops.hpp"

#include <algorithm>

#include "roles/inbox.hpp"
#include "roles/report.hpp"

namespace meshloom::runtime {

std::vector<wire::Report> lead_steps(roles::Lead& lead, int64_t first, int64_t end,
                                     const StepDone& on_step) {
  int64_t done = first;
  // In trainer order, not arrival order: sums over trainers (the loss) come
  // out the same to the last bit in every run.
  auto hand_on_completed = [&] {
    for (; done < lead.steps_completed(); ++done) {
      std::vector<wire::Ack> acks = lead.take_acks(done);
      std::sort(acks.begin(), acks.end(),
                [](const wire::Ack& a, const wire::Ack& b) { return a.trainer < b.trainer; });
      on_step(done, std::move(acks));
    }
  };
  for (int64_t s = first; s < end; ++s) {
    lead.dispatch_step(s + 1 == end);
    hand_on_completed();
  }
  lead.drain_acks();
  hand_on_completed();
  return lead.stop();
}

void trainer_steps(const parallel::World& w, const StepAnswer& answer,
                   const AddTotals& add_totals) {
  wire::Report report;
  report.role = int(parallel::Role::trainer);
  roles::BatchInbox inbox(w);
  while (true) {
    double wait = 0;
    const wire::Batch b = inbox.receive(&wait);
    wire::Ack ack = answer(b, wait);
    roles::send_ack(ack);
    for (const auto& mb : b.micro) report.tokens += int64_t(mb.tokens.size());
    report.busy_seconds += ack.step_seconds;  // the step, data wait excluded
    if (b.last) break;
  }
  if (add_totals) add_totals(&report);
  roles::send_final_report(report, inbox.worker_pss_kib());
}

}  // namespace meshloom::runtime
