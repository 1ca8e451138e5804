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
bench_train() {
  local name=$1 np=$2
  shift 2
  echo "[$(basename "$0" .sh)] $name" >&2
  mpirun --oversubscribe --bind-to none -np "$np" "$MESHLOOM" train -c "$work/c.yaml" \
    --set run.dir="$work/$name" "$@" >"$work/$name.log" 2>&1 || { cat "$work/$name.log"; exit 1; }
}
