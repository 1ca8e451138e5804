#include "plan/cost/checkpoint_cost.hpp"

#include <algorithm>

#include "base/check.hpp"
#include "base/strings.hpp"

namespace meshloom::plan {

namespace {
constexpr double kStateBytesPerParameter = 12;  // fp32 weights, m and v
}

std::vector<CheckpointCost> checkpoint_costs(const CheckpointSetup& s) {
  const int64_t group = int64_t(s.tp) * s.pp;
  if (s.gpus < group || s.gpus % group != 0)
    throw Error(strf("checkpoint model: %lld GPUs do not hold whole TP x PP groups of %lld",
                     (long long)s.gpus, (long long)group));
  const double data_ranks = double(s.gpus / group);
  const double parameters = s.model.parameters();
  const double state = kStateBytesPerParameter * parameters;
  const double shard_params = 4 * parameters / double(group);  // one trainer's weights
  const double shard_moments = 8 * parameters / double(group) / (s.zero1 ? data_ranks : 1.0);

  // Gathered: the whole state crosses trainer 0's link, then one process
  // writes it; the training waits for the gather (the write is in the
  // background), or for both.
  CheckpointCost gathered{"gathered", state};
  gathered.writers = 1;
  gathered.writer_bytes = state;
  gathered.trainer0_bytes = state;
  const double gather_s = state / s.network_bandwidth;
  const double one_writer_s = state / std::min(s.writer_bandwidth, s.fs_bandwidth);
  gathered.save_s = gather_s + one_writer_s;
  gathered.stall_s = gather_s;
  gathered.sync_stall_s = gathered.save_s;

  // Collective: each trainer copies its shard to host memory and writes the
  // blocks it owns, an equal share of the state (train/state_blocks.hpp), as
  // fast as one writer or the file system allows.
  CheckpointCost collective{"collective", state};
  collective.writers = double(s.gpus);
  collective.writer_bytes = state / double(s.gpus);
  collective.trainer0_bytes = shard_params + shard_moments;
  const double snapshot_s = collective.trainer0_bytes / s.host_bandwidth;
  const double write_s =
      std::max(collective.writer_bytes / s.writer_bandwidth, state / s.fs_bandwidth);
  collective.save_s = snapshot_s + write_s;
  collective.stall_s = snapshot_s;
  collective.sync_stall_s = collective.save_s;
  return {gathered, collective};
}

std::string checkpoint_report(const CheckpointSetup& s, const std::vector<CheckpointCost>& costs) {
  std::string out = strf(
      "checkpoint of %s (%.1f B parameters, %s of state) on %lld GPUs (tp %d, pp %d, ZeRO-1 %s); "
      "file system %.0f GB/s, one writer %.1f GB/s, network %.0f GB/s, GPU to host %.0f GB/s\n\n",
      s.model.name.c_str(), s.model.parameters() / 1e9,
      human_bytes(costs.empty() ? 0 : costs[0].state_bytes).c_str(), (long long)s.gpus, s.tp, s.pp,
      s.zero1 ? "on" : "off", s.fs_bandwidth / 1e9, s.writer_bandwidth / 1e9,
      s.network_bandwidth / 1e9, s.host_bandwidth / 1e9);
  out +=
      "| method | writers | most one writes | trainer 0 holds | save | stall (background) "
      "| stall (synchronous) |\n| --- | --- | --- | --- | --- | --- | --- |\n";
  for (const CheckpointCost& c : costs)
    out += strf("| %s | %s | %s | %s | %s | %s | %s |\n", c.method.c_str(),
                with_commas(int64_t(c.writers)).c_str(), human_bytes(c.writer_bytes).c_str(),
                human_bytes(c.trainer0_bytes).c_str(), human_seconds(c.save_s).c_str(),
                human_seconds(c.stall_s).c_str(), human_seconds(c.sync_stall_s).c_str());
  out +=
      "\ngathered: trainer 0 receives and holds the whole state (format 1); collective: every "
      "trainer writes its share of one file (format 2). The stall with background writing is "
      "what training waits for: the gather, or each trainer's copy of its shard to host memory.\n";
  return out;
}

}  // namespace meshloom::plan
