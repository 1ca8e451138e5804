#!/usr/bin/env bash
# core_share.sh SHARE COMMAND...: runs COMMAND (one MPI rank) capped at SHARE
# of one core by a cgroup CPU quota, for benchmarks with more ranks than
# cores. Uncapped, a rank that waits gives its core to the others, so idle
# time (a pipeline's bubbles, a short pipeline waiting for a long one) costs
# no wall time; capped, each rank runs as on a core of its own, SHARE times
# as fast, and waiting costs what it costs on a cluster. Put it between
# mpirun and the executable:
#   CORE_SHARE_GROUP=NAME mpirun -np 8 scripts/bench/core_share.sh 0.24 meshloom ...
# Each rank gets the cgroup meshloom-core-share/NAME/rank<R> (cgroup v1's cpu
# controller or cgroup v2's cpu.max); remove them afterwards with
#   scripts/bench/core_share.sh --remove NAME
# Needs a writable cgroup file system (root in most containers) and
# SHARE x ranks <= the cores.
#   CORE_SHARE_PERIOD_US  the quota's period (default 10000: a capped rank
#                         waits at most 10 ms for its next slice)
#   scripts/bench/core_share.sh --check   says whether this machine can cap
set -euo pipefail
period=${CORE_SHARE_PERIOD_US:-10000}

# The cgroup root that can cap CPU time: v1's cpu hierarchy or v2's unified one.
cgroup_root() {
  if [[ -w /sys/fs/cgroup/cpu/cgroup.procs && -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]]; then
    echo /sys/fs/cgroup/cpu
  elif [[ -w /sys/fs/cgroup/cgroup.procs ]] && grep -qw cpu /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
    echo /sys/fs/cgroup
  else
    return 1
  fi
}

case ${1:-} in
  --check)
    root=$(cgroup_root) || { echo "no writable cgroup CPU controller" >&2; exit 1; }
    probe="$root/meshloom-core-share/probe-$$"
    mkdir -p "$probe" 2>/dev/null || { echo "cannot create cgroups under $root" >&2; exit 1; }
    # v2 shows cpu.max in a child only where every parent delegates cpu.
    quota_file=cpu.cfs_quota_us
    if [[ $root != /sys/fs/cgroup/cpu ]]; then
      quota_file=cpu.max
      { echo +cpu >"$root/meshloom-core-share/cgroup.subtree_control"; } 2>/dev/null || true
    fi
    [[ -w $probe/$quota_file ]] && ok=1 || ok=0
    rmdir "$probe"
    ((ok)) || { echo "no CPU quota ($quota_file) in cgroups under $root" >&2; exit 1; }
    echo "$root"
    exit 0
    ;;
  --remove)
    root=$(cgroup_root) || exit 0
    dir="$root/meshloom-core-share/${2:?--remove NAME}"
    [[ -d $dir ]] || exit 0
    find "$dir" -mindepth 1 -depth -type d -exec rmdir {} + 2>/dev/null || true
    rmdir "$dir" 2>/dev/null || echo "core_share.sh: $dir still has processes" >&2
    exit 0
    ;;
  '' | -h | --help)
    sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac

share=$1
shift
(($# > 0)) || { echo "core_share.sh: no command after the share" >&2; exit 2; }
quota=$(awk -v s="$share" -v p="$period" 'BEGIN { q = int(s * p); if (s <= 0 || q < 1000) exit 1; print q }') ||
  { echo "core_share.sh: share '$share' of a ${period} us period is under the kernel's 1 ms minimum" >&2; exit 2; }
root=$(cgroup_root) || { echo "core_share.sh: no writable cgroup CPU controller (need root and /sys/fs/cgroup)" >&2; exit 1; }
rank=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-${SLURM_PROCID:-$$}}}
dir="$root/meshloom-core-share/${CORE_SHARE_GROUP:-default}/rank$rank"
mkdir -p "$dir"
if [[ $root == /sys/fs/cgroup/cpu ]]; then
  echo "$period" >"$dir/cpu.cfs_period_us"
  echo "$quota" >"$dir/cpu.cfs_quota_us"
else
  # v2: a child gets the cpu controller only if every parent delegates it.
  for d in "$root/meshloom-core-share" "$root/meshloom-core-share/${CORE_SHARE_GROUP:-default}"; do
    { echo +cpu >"$d/cgroup.subtree_control"; } 2>/dev/null || true
  done
  echo "$quota $period" >"$dir/cpu.max"
fi
echo $$ >"$dir/cgroup.procs"
exec "$@"
