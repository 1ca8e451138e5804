#!/usr/bin/env bash
# compare_step_dumps.sh OLD_MESHLOOM NEW_MESHLOOM [OUT]: are two builds'
# numerics the same? Trains the quickstart (configs/quickstart.yaml, 3 steps)
# with each binary in three layouts (8 ranks tp 1; 7 ranks tp 2 with sequence
# parallelism; 7 ranks pp 2), dumps step 2 (batch, parameters, gradients,
# loss) and compares the dumps with h5diff: a refactoring that keeps the
# numerics gives "identical" everywhere. Needs data/prepared
# (scripts/data/prepare_data.sh). Prints a table; with OUT, writes OUT.csv.
set -euo pipefail
cd "$(dirname "$0")/../.."
[[ $# -ge 2 ]] || { echo "usage: $0 OLD_MESHLOOM NEW_MESHLOOM [OUT]" >&2; exit 2; }
old=$(realpath "$1") new=$(realpath "$2") out=${3:-}
[[ -f data/prepared/pydocs.idx ]] ||
  { echo "compare_step_dumps: no data/prepared: run scripts/data/prepare_data.sh" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
work=$(mktemp -d /tmp/meshloom_dumps.XXXXXX)
trap 'rm -rf "$work"' EXIT
data=$PWD/data/prepared
layouts=("tp1 8 " "tp2 7 parallel: {tp: 2, sequence_parallel: true}" "pp2 7 parallel: {pp: 2}")
for bin in old new; do
  exe=$old; [[ $bin == new ]] && exe=$new
  for entry in "${layouts[@]}"; do
    read -r name np extra <<<"$entry"
    yaml=$work/$bin-$name.yaml
    # Without the eval section: training's numerics alone, which builds from
    # before evaluation (or its keys) can train too.
    sed -e "s#dir: ../runs/quickstart#dir: $work/run-$bin-$name#" -e "s#steps: 80#steps: 3#" \
      -e "s#../data/prepared#$data#" -e '/^eval:/,/^[^ ]/{/^eval:/d;/^  /d}' \
      configs/quickstart.yaml >"$yaml"
    [[ -n $extra ]] && printf '%s\n' "$extra" >>"$yaml"
    echo "[dumps] $bin $name: mpirun -np $np $exe train --dump-step 2" >&2
    mpirun --bind-to none -np "$np" "$exe" train --config "$yaml" --dump-step 2 \
      "$work/$bin-$name.h5" >"$work/$bin-$name.log" 2>&1 ||
      { tail -20 "$work/$bin-$name.log" >&2; exit 1; }
  done
done
# Datasets only one dump has: a new one (a format addition) is listed, a
# missing one fails.
names() { h5ls -r "$1" | awk '{print $1}' | sort; }
printf '| layout | datasets | differing | verdict |\n| --- | --- | --- | --- |\n'
[[ -n $out ]] && echo "layout,datasets,differing,verdict,date" >"$out.csv"
bad=0
for entry in "${layouts[@]}"; do
  read -r name _ <<<"$entry"
  report=$(h5diff -r "$work/old-$name.h5" "$work/new-$name.h5" 2>&1) && rc=0 || rc=$?
  datasets=$(grep -c '^dataset:' <<<"$report" || true)
  differing=$(grep -E '^[0-9]+ differences? found' <<<"$report" | grep -vc '^0 differences' || true)
  only_old=$(comm -23 <(names "$work/old-$name.h5") <(names "$work/new-$name.h5") | xargs)
  only_new=$(comm -13 <(names "$work/old-$name.h5") <(names "$work/new-$name.h5") | xargs)
  verdict=identical
  [[ -n $only_new ]] && verdict="identical; new: $only_new"
  # h5diff also fails on datasets one file lacks: those are judged above.
  if ((differing > 0)) || { ((rc != 0)) && [[ -z $only_new$only_old ]]; }; then
    verdict=DIFFERENT
    bad=1
  fi
  [[ -n $only_old ]] && { verdict="DIFFERENT; missing: $only_old"; bad=1; }
  printf '| %s | %s | %s | %s |\n' "$name" "$datasets" "$differing" "$verdict"
  [[ -n $out ]] && echo "$name,$datasets,$differing,$verdict,$(date -u +%F)" >>"$out.csv"
done
exit $bad
