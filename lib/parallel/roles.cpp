#include "parallel/roles.hpp"

#include "base/math.hpp"
#include "base/strings.hpp"

namespace meshloom::parallel {

const char* role_name(Role role) {
  switch (role) {
    case Role::constructor:
      return "constructor";
    case Role::loader:
      return "loader";
    case Role::trainer:
      return "trainer";
  }
  return "?";
}

Role RoleLayout::role_of(int rank) const {
  if (rank < constructors) return Role::constructor;
  if (rank < constructors + loaders) return Role::loader;
  return Role::trainer;
}

int RoleLayout::first_rank(Role role) const {
  switch (role) {
    case Role::constructor:
      return 0;
    case Role::loader:
      return constructors;
    case Role::trainer:
      return constructors + loaders;
  }
  return 0;
}

int RoleLayout::count(Role role) const {
  switch (role) {
    case Role::constructor:
      return constructors;
    case Role::loader:
      return loaders;
    case Role::trainer:
      return trainers;
  }
  return 0;
}

int RoleLayout::index_in_role(int rank) const { return rank - first_rank(role_of(rank)); }

std::string RoleLayout::describe(const std::vector<std::string>& hosts) const {
  std::string out;
  for (Role role : {Role::constructor, Role::loader, Role::trainer}) {
    int n = count(role), first = first_rank(role);
    if (n == 0) continue;
    std::string span = n == 1 ? strf("rank %d", first) : strf("ranks %d-%d", first, first + n - 1);
    std::vector<std::string> uniq;
    for (int r = first; r < first + n && r < int(hosts.size()); ++r) {
      bool seen = false;
      for (const auto& h : uniq) seen = seen || h == hosts[r];
      if (!seen) uniq.push_back(hosts[r]);
    }
    std::string note;
    if (role == Role::constructor) note = " (rank 0: lead constructor, planner)";
    out += strf("  %-12s %3d  %-12s on %s%s\n", role_name(role), n, span.c_str(),
                join(uniq, ",").c_str(), note.c_str());
  }
  return out;
}

RoleLayout make_layout(int world, const config::Config& config) {
  if (config.run.backend == config::Backend::cuda && config.model.n_heads > 0 &&
      config.model.d_model / config.model.n_heads != 64 &&
      config.model.d_model / config.model.n_heads != 128)
    throw config::ConfigError(strf(
        "run.backend: cuda: the GPU attention kernels take head_dim 64 or 128, but model.d_model "
        "%lld / model.n_heads %lld is %lld",
        (long long)config.model.d_model, (long long)config.model.n_heads,
        (long long)(config.model.d_model / config.model.n_heads)));
#ifndef MESHLOOM_HAVE_CUDA
  if (config.run.backend == config::Backend::cuda)
    throw config::ConfigError(
        "run.backend: cuda, but this meshloom was built without the CUDA backend (nvcc and NCCL "
        "were not found when it was configured): rebuild on a machine with the CUDA toolkit, or "
        "set run.backend: cpu");
#endif
  const auto& roles = config.cluster.roles;
  RoleLayout l;
  l.world = world;
  l.constructors = int(roles.constructors);
  l.loaders = int(roles.loaders);
  l.trainers = world - l.constructors - l.loaders;
  if (l.trainers < 1)
    throw config::ConfigError(
        strf("cluster.roles: %d constructor(s) + %d loader(s) + at least 1 trainer need %d ranks, "
             "and the job has %d: launch more ranks (mpirun -np %d or more) or lower cluster.roles",
             l.constructors, l.loaders, l.constructors + l.loaders + 1, world,
             l.constructors + l.loaders + 1));
  const int64_t tp = config.parallel.tp;
  if (l.trainers % tp != 0)
    throw config::ConfigError(
        strf("parallel.tp %lld must divide the trainers, and the layout has %d (%d ranks minus "
             "cluster.roles' %d constructor(s) and %d loader(s)): launch a multiple of %lld "
             "trainers or change parallel.tp",
             (long long)tp, l.trainers, world, l.constructors, l.loaders, (long long)tp));
  const int64_t pp = config.parallel.pp;
  if (l.trainers % (tp * pp) != 0)
    throw config::ConfigError(
        strf("parallel.tp x parallel.pp = %lld x %lld must divide the trainers, and the layout "
             "has %d: launch a multiple of %lld trainers or change parallel.tp / parallel.pp",
             (long long)tp, (long long)pp, l.trainers, (long long)(tp * pp)));
  // What runs on the CPU backend only so far (sequence parallelism,
  // images): refused with cuda, by key.
  if (config.run.backend == config::Backend::cuda) {
    const struct {
      bool used;
      const char* setting;
      const char* off;
    } cpu_only[] = {
        {config.parallel.sequence_parallel && tp > 1, "parallel.sequence_parallel",
         "parallel.sequence_parallel: false"},
        {config::patch_dim(config) > 0, "an image-text source (format: webdataset)",
         "text sources only"},
    };
    for (const auto& c : cpu_only)
      if (c.used)
        throw config::ConfigError(
            strf("%s with run.backend: cuda is not implemented yet: use run.backend: cpu or %s",
                 c.setting, c.off));
  }
  // The longest sample must fit on the HDP ranks there are (HDP splits it over
  // ceil(seq_len / C) of them at least; offloading may need fewer).
  const int64_t need = ceil_div(config.data.seq_len, config.plan.capacity);
  const int64_t hdp_ranks = l.trainers / (tp * pp);
  if (!config.plan.offload && need > hdp_ranks)
    throw config::ConfigError(
        strf("data.seq_len %lld needs %lld HDP ranks of plan.capacity %lld, but the layout has "
             "%lld (%d trainers, parallel.tp %lld, parallel.pp %lld): raise plan.capacity, lower "
             "data.seq_len, or launch more ranks",
             (long long)config.data.seq_len, (long long)need, (long long)config.plan.capacity,
             (long long)hdp_ranks, l.trainers, (long long)tp, (long long)pp));
  for (size_t i = 0; i < config.faults.inject.size(); ++i) {
    const config::FaultConfig& f = config.faults.inject[i];
    if (f.rank >= world)
      throw config::ConfigError(strf("faults.inject[%zu].rank is %lld, but the job has %d ranks", i,
                                     (long long)f.rank, world));
    // A death mid-write needs a trainer that writes: its part of a format 2 file.
    if (f.kind != config::FaultKind::crash_writing) continue;
    if (l.role_of(int(f.rank)) != Role::trainer)
      throw config::ConfigError(
          strf("faults.inject[%zu]: crash_writing acts on a trainer, and rank "
               "%lld is a %s",
               i, (long long)f.rank, role_name(l.role_of(int(f.rank)))));
    if (!config.checkpoint.collective)
      throw config::ConfigError(
          strf("faults.inject[%zu]: crash_writing needs trainers that write "
               "their part (checkpoint.collective: true)",
               i));
  }
  return l;
}

}  // namespace meshloom::parallel
