# shellcheck shell=bash
# Sourced by the simulate benchmarks (bench_pp_simulate.sh,
# bench_cp_simulate.sh) from the repository's root: the meshloom binary
# (MESHLOOM, built by scripts/setup.sh if missing), the results folder `out`,
# a scratch file `tmp` removed on exit, the two machines they compare (the
# simulator's default, and the one that reproduces ByteScale's LLaMA-7B case
# study, docs/plan.md), and append_rows, which adds a run's CSV to `csv` with
# a first column (the header once).
MESHLOOM=${MESHLOOM:-build/app/meshloom}
[[ -x $MESHLOOM ]] || scripts/setup.sh >/dev/null
out=bench/results
mkdir -p "$out"
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
# shellcheck disable=SC2034 # used by the scripts that source this
declare -A machines=([default]="" [case-study]="--bandwidth 7 --mfu 0.27")

# append_rows COLUMN VALUE: the rows of $tmp into $csv, VALUE first.
append_rows() {
  # shellcheck disable=SC2154 # csv: set by the sourcing script
  [[ -f $csv ]] || sed -n "1s/^/$1,/p" "$tmp" >"$csv"
  sed -n "2,\$s/^/$2,/p" "$tmp" >>"$csv"
}
