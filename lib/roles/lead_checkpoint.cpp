// The lead's part of a checkpoint: the data plane's state, the document
// lengths learned from loaders (full or since the last full one), and the
// group communicators' cache history; and resuming from them.
#include <string>
#include <vector>

#include "base/bytes.hpp"
#include "base/log.hpp"
#include "roles/lead.hpp"

namespace meshloom::roles {

// What the lead puts into a checkpoint: the data plane's state after choosing
// this step, and the document lengths learned since the last checkpoint (or
// all of them, every checkpoint.full_every checkpoints).
std::string Lead::checkpoint_data() {
  const bool full = checkpoints_ % w_.config.checkpoint.full_every == 0;
  ByteWriter out;
  out.put_string(dataplane::serialize(plane_->state()));
  out.put(uint8_t(full));
  const int64_t step = plane_->state().step - 1;
  if (full) last_full_ = ckpt::checkpoint_path("", step).substr(1);
  out.put_string(full ? std::string() : last_full_);
  catalogue_->write_learned(out, full);
  const std::vector<comm::MemberSet> sets = placer_->group_sets();
  out.put(uint64_t(sets.size()));
  for (const comm::MemberSet& set : sets) out.put_vector(set);
  ++checkpoints_;
  return std::move(out.bytes());
}

void Lead::resume(const ckpt::Checkpoint& c, const std::vector<ckpt::SourceLengths>& lengths) {
  plane_->restore(dataplane::deserialize_state(c.plane));
  placer_->restore_group_sets(c.group_sets);
  next_step_ = first_step_ = c.step + 1;
  acks_.start_at(first_step_);
  const int64_t known = catalogue_->restore(lengths);
  // Lengths came without their loader: any loader serving the source will do.
  if (local_.empty()) catalogue_->assign_missing_owners(assignment_);
  LOG_INFO("resumed the data plane at step %lld (%lld document lengths restored)",
           (long long)first_step_, (long long)known);
}

}  // namespace meshloom::roles
