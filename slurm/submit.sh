#!/usr/bin/env bash
# submit.sh: submit a meshloom experiment with as many tasks as its roles need.
#   slurm/submit.sh CONFIG TRAINERS [TEMPLATE] [sbatch options...]
# Ranks = cluster.roles.constructors + cluster.roles.loaders + TRAINERS
# (read from the effective config). TEMPLATE defaults to slurm/meshloom-1node.sbatch.
# The job's output goes to RUN_DIR/slurm-<UTC submit time>-<job id>.out (run.dir
# of the effective config), unless the sbatch options give -o/--output: a
# name no later job can share, even where job numbers start again (a new
# cluster), and requeued attempts append to it.
set -euo pipefail
[[ $# -ge 2 ]] || { echo "usage: $0 CONFIG TRAINERS [TEMPLATE] [sbatch options...]" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
config=$1 trainers=$2
shift 2
template=$here/meshloom-1node.sbatch
if [[ $# -gt 0 && -f $1 ]]; then template=$1; shift; fi
MESHLOOM=${MESHLOOM:-$here/../build/app/meshloom}
# The job's own --set options (EXTRA, split at spaces as the templates do)
# may change the roles: size the job with them.
sets=()
# shellcheck disable=SC2206
extra=(${EXTRA:-})
for ((i = 0; i < ${#extra[@]}; i++)); do
  [[ ${extra[i]} == --set && $((i + 1)) -lt ${#extra[@]} ]] && sets+=(--set "${extra[i + 1]}")
done
effective=$("$MESHLOOM" config show --config "$config" "${sets[@]}")
k=$(echo "$effective" | sed -n 's/^    constructors: //p')
l=$(echo "$effective" | sed -n 's/^    loaders: //p')
n=$((k + l + trainers))
echo "[submit] $config: $k constructor(s) + $l loader(s) + $trainers trainer(s) = $n tasks" >&2
output=()
if [[ " $* " != *" -o "* && " $* " != *" --output"* ]]; then
  run_dir=$(echo "$effective" | awk '/^run:/ { r = 1; next } /^[^ ]/ { r = 0 }
                                     r && /^  dir: / { sub(/^  dir: /, ""); print; exit }')
  mkdir -p "$run_dir"
  output=(--output="$run_dir/slurm-$(date -u +%Y%m%d-%H%M%S)-%j.out")
  echo "[submit] output: ${output[0]#--output=}" >&2
fi
CONFIG=$(realpath "$config") MESHLOOM=$(realpath "$MESHLOOM") \
  exec sbatch -n "$n" --export=ALL "${output[@]}" "$@" "$template"
