#!/usr/bin/env bash
# meshloom-sweep.sh: a scaling sweep. Submits one job per trainer count, each
# running `meshloom data` (the data path; TRAIN=1 runs training) on CONFIG,
# waits for all, and collects tokens/s and memory into a CSV. The points run
# one after another (one job name, --dependency=singleton), so that they do
# not share the nodes' cores; PARALLEL=1 submits them to run side by side. A
# point without a result is named with its output file, and the script then
# exits 1.
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
  order=(--job-name="meshloom-sweep-$$" --dependency=singleton)
  [[ ${PARALLEL:-0} == 1 ]] && order=()
  if ! id=$(sbatch --parsable -n "$n" "${order[@]}" --output="$work/out-$t.txt" \
    --wrap "srun --mpi=pmix $cmd"); then
    echo "[sweep] trainers=$t: sbatch refused the point; cancelling the ones submitted" >&2
    for j in "${jobs[@]}"; do scancel "${j%%:*}"; done
    exit 1
  fi
  echo "[sweep] trainers=$t ranks=$n job $id" >&2
  jobs+=("$id:$t")
done
for j in "${jobs[@]}"; do
  id=${j%%:*}
  while squeue -h -j "$id" 2>/dev/null | grep -q .; do sleep 1; done
done
echo "trainers,ranks,tokens_per_s,loader_pss_kib,trainer_pss_kib" >"$out"
missing=0
for j in "${jobs[@]}"; do
  t=${j##*:}
  if [[ ${TRAIN:-0} == 1 ]]; then f=$work/run-$t/metrics.jsonl; else f=$work/report-$t.json; fi
  # `data` writes a report; `train` writes metrics.jsonl (steps, then the
  # ranks' final line): tokens/s is the median over steps there.
  if [[ -f $f ]] && /usr/bin/python3 -c '
import json, statistics, sys
path, t = sys.argv[1], sys.argv[2]
if path.endswith(".json"):
    r = json.load(open(path)); roles = r["roles"]
    print(t, r["constructors"] + r["loaders"] + r["trainers"], round(r["tokens_per_s"]),
          roles.get("loader", {}).get("pss_sum_kib", 0), roles.get("trainer", {}).get("pss_sum_kib", 0), sep=",")
else:
    rows = [json.loads(l) for l in open(path) if l.strip()]
    steps = [r for r in rows if "step" in r]
    final = [r for r in rows if r.get("final")][-1]
    pss = lambda role: sum(x["pss_kib"] for x in final["ranks"] if x["role"] == role)
    print(t, len(final["ranks"]), round(statistics.median(r["tokens_per_s"] for r in steps)),
          pss("loader"), pss("trainer"), sep=",")' "$f" "$t" >>"$out" 2>/dev/null; then
    :
  else
    echo "[sweep] trainers=$t: no result; see $work/out-$t.txt" >&2
    echo "$t,,,," >>"$out"
    missing=1
  fi
done
echo "[sweep] $out (outputs in $work)" >&2
column -s, -t <"$out"
exit $missing
