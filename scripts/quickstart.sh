#!/usr/bin/env bash
# quickstart.sh: install what is missing, build, prepare real text (Python
# docs, the King James Bible, fortunes; GPT-2 tokenizer) and train the
# quickstart model (configs/quickstart.yaml) on 8 ranks of this machine:
# 1 constructor, 2 loaders, 5 trainers. A few minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/data/prepare_data.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
NP=${NP:-8}
CONFIG=${CONFIG:-configs/quickstart.yaml}  # configs/quickstart_images.yaml: with clip art
echo "[quickstart] mpirun -np $NP build/app/meshloom train --config $CONFIG $*"
mpirun --oversubscribe --bind-to none -np "$NP" build/app/meshloom train \
  --config "$CONFIG" "$@"
dir=$(build/app/meshloom config show --config "$CONFIG" "$@" 2>/dev/null |
  sed -n 's/^  dir: //p' | head -1)
if [[ -f $dir/metrics.jsonl ]]; then
  /usr/bin/python3 scripts/plot/plot_metrics.py "$dir/metrics.jsonl" "$dir/metrics.png"
fi
if [[ -f $dir/eval_positions.csv ]]; then  # eval.every: the held-out loss by position
  /usr/bin/python3 scripts/plot/plot_eval_positions.py "$dir/eval_positions.csv" "$dir/eval_positions.png"
fi
