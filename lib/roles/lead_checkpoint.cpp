// The lead's part of a checkpoint: the data plane's state, the document
// lengths learned from loaders (full or since the last full one), and the
// group communicators' cache history; and resuming from them.
#include <string>
#include <vector>

#include "base/bytes.hpp"
#include "base/log.hpp"
#include "roles/lead.hpp"

namespace meshloom {

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
  out.put(uint64_t(learned_.size()));
  for (size_t s = 0; s < learned_.size(); ++s) {
    const size_t from = full ? 0 : logged_[s];
    std::vector<int64_t> docs(learned_[s].begin() + int64_t(from), learned_[s].end()), lengths,
        images;
    for (int64_t d : docs) lengths.push_back(lengths_[s][size_t(d)]);
    if (!images_[s].empty())
      for (int64_t d : docs) images.push_back(images_[s][size_t(d)]);
    out.put_string(w_.config.data.sources[s].name);
    out.put_vector(docs);
    out.put_vector(lengths);
    out.put_vector(images);
    logged_[s] = learned_[s].size();
  }
  const std::vector<MemberSet> sets = group_history_.sets();
  out.put(uint64_t(sets.size()));
  for (const MemberSet& set : sets) out.put_vector(set);
  ++checkpoints_;
  return std::move(out.bytes());
}

void Lead::resume(const ckpt::Checkpoint& c, const std::vector<ckpt::SourceLengths>& lengths) {
  plane_->restore(dataplane::deserialize_state(c.plane));
  // The cache replay, least recent first; sets of ranks this run lacks go.
  for (const auto& set : c.group_sets)
    if (!set.empty() && set.back() < w_.mesh.hdp_ranks()) group_history_.prepare({set});
  next_step_ = first_step_ = c.step + 1;
  int64_t known = 0;
  for (const auto& sl : lengths) {
    size_t s = 0;
    while (s < w_.config.data.sources.size() && w_.config.data.sources[s].name != sl.source) ++s;
    if (s == w_.config.data.sources.size()) continue;  // a source no longer in the config
    // An image-text source needs its image counts too: without them, ask again.
    if (!images_[s].empty() && sl.images.size() != sl.docs.size()) continue;
    for (size_t i = 0; i < sl.docs.size(); ++i) {
      const int64_t d = sl.docs[i];
      if (d < 0 || d >= int64_t(lengths_[s].size())) continue;  // the source changed size
      if (lengths_[s][size_t(d)] < 0) learned_[s].push_back(d);
      lengths_[s][size_t(d)] = sl.lengths[i];
      if (!images_[s].empty()) images_[s][size_t(d)] = sl.images[i];
      ++known;
    }
  }
  // Lengths came without their loader: any loader serving the source will do.
  if (local_.empty())
    for (size_t s = 0; s < owner_.size(); ++s) {
      const int rank = w_.layout.first_rank(Role::loader) + assignment_.loaders_of_source[s].at(0);
      for (size_t d = 0; d < owner_[s].size(); ++d)
        if (lengths_[s][d] >= 0 && owner_[s][d] < 0) owner_[s][d] = rank;
    }
  LOG_INFO("resumed the data plane at step %lld (%lld document lengths restored)",
           (long long)first_step_, (long long)known);
}

}  // namespace meshloom
