#!/usr/bin/env bash
# meshloom-sweep.sh: a scaling sweep. Submits one job per trainer count, each
# running `meshloom data` (the data path; TRAIN=1 runs training) on CONFIG,
# waits for all, and collects tokens/s and memory into a CSV.
#   slurm/meshloom-sweep.sh CONFIG "1 2 4 8" [OUT.csv]
set -euo pipefail
[[ $# -ge 2 ]] || { echo "usage: $0 CONFIG 'TRAINERS...' [OUT.csv]" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
config=$(realpath "$1")
counts=$2
out=${3:-sweep.csv}
MESHLOOM=$(realpath "${MESHLOOM:-$here/../build/app/meshloom}")
STEPS=${STEPS:-50}
effective=$("$MESHLOOM" config show --config "$config")
k=$(echo "$effective" | sed -n 's/^    constructors: //p')
l=$(echo "$effective" | sed -n 's/^    loaders: //p')
work=$(mktemp -d "${TMPDIR:-/tmp}/meshloom-sweep.XXXXXX")
jobs=()
for t in $counts; do
  n=$((k + l + t))
  if [[ ${TRAIN:-0} == 1 ]]; then
    cmd="$MESHLOOM train --config $config --set run.dir=$work/run-$t"
  else
    cmd="$MESHLOOM data --config $config --steps $STEPS --report $work/report-$t.json"
  fi
  id=$(sbatch --parsable -n "$n" --output="$work/out-$t.txt" --wrap "srun --mpi=pmix $cmd")
  echo "[sweep] trainers=$t ranks=$n job $id" >&2
  jobs+=("$id:$t")
done
for j in "${jobs[@]}"; do
  id=${j%%:*}
  while squeue -h -j "$id" 2>/dev/null | grep -q .; do sleep 1; done
done
echo "trainers,ranks,tokens_per_s,loader_pss_kib,trainer_pss_kib" >"$out"
for j in "${jobs[@]}"; do
  t=${j##*:}
  f=$work/report-$t.json
  if [[ -f $f ]]; then
    /usr/bin/python3 -c '
import json, sys
r = json.load(open(sys.argv[1])); roles = r["roles"]
print(sys.argv[2], r["constructors"] + r["loaders"] + r["trainers"], round(r["tokens_per_s"]),
      roles.get("loader", {}).get("pss_sum_kib", 0), roles.get("trainer", {}).get("pss_sum_kib", 0), sep=",")' "$f" "$t" >>"$out"
  else
    echo "$t,,,," >>"$out"
  fi
done
echo "[sweep] $out (outputs in $work)" >&2
column -s, -t <"$out"
