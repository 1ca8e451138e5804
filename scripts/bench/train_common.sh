# shellcheck shell=bash disable=SC2034  # variables for the sourcing script
# train_common.sh: what the benchmarks that train on this machine share
# (bench_pp.sh, bench_cp.sh; source it): the repository root as the working
# folder, the executable ($MESHLOOM, built by scripts/setup.sh if missing),
# the quickstart corpora (prepared if missing), mpirun as root, $out for
# results, a $work folder removed at exit, and bench_train.
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
MESHLOOM=${MESHLOOM:-build/app/meshloom}
[[ -x $MESHLOOM ]] || scripts/setup.sh >/dev/null
[[ -f data/prepared/pydocs.idx ]] || scripts/data/prepare_data.sh >/dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=bench/results
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# bench_train NAME RANKS [train arguments...]: trains $work/c.yaml on RANKS
# ranks into $work/NAME (log $work/NAME.log); prints the log and exits on error.
# With CORE_SHARE set, each rank runs capped at that share of a core
# (core_share.sh: idle time then costs wall time, as with a core per rank).
bench_train() {
  local name=$1 np=$2 launch=()
  shift 2
  echo "[$(basename "$0" .sh)] $name${CORE_SHARE:+ (each rank capped at $CORE_SHARE of a core)}" >&2
  if [[ -n ${CORE_SHARE:-} ]]; then
    export CORE_SHARE_GROUP=${CORE_SHARE_GROUP:-$(basename "$work")}
    launch=(-x CORE_SHARE_GROUP scripts/bench/core_share.sh "$CORE_SHARE")
  fi
  local rc=0
  mpirun --oversubscribe --bind-to none -np "$np" "${launch[@]}" "$MESHLOOM" train -c "$work/c.yaml" \
    --set run.dir="$work/$name" "$@" >"$work/$name.log" 2>&1 || rc=$?
  [[ -n ${CORE_SHARE:-} ]] && scripts/bench/core_share.sh --remove "$CORE_SHARE_GROUP"
  ((rc == 0)) || { cat "$work/$name.log"; exit 1; }
}

# core_share_for RANKS: the share of a core to cap each of RANKS ranks at
# (95% of the cores spread evenly, leaving some for mpirun and the system),
# or nothing where there is a core per rank or no cgroup to cap with.
core_share_for() {
  local ranks=$1 cores
  cores=$(nproc)
  ((ranks > cores)) || return 0
  scripts/bench/core_share.sh --check >/dev/null 2>&1 || {
    echo "[$(basename "$0" .sh)] $ranks ranks on $cores cores and no cgroup to cap them:" \
      "waiting ranks give their cores away, idle time costs no wall time" >&2
    return 0
  }
  awk -v c="$cores" -v r="$ranks" 'BEGIN { printf "%.3f", 0.95 * c / r }'
}
