#!/usr/bin/env bash
# bench_ckpt.sh: the cost of checkpoints. Trains the same run three ways —
# no checkpoints, a background checkpoint every step, a synchronous one every
# step — and reports the mean step time, the overhead, and the checkpoint
# sizes (full vs delta document lengths). Writes bench/results/ckpt.csv, a
# markdown table on stdout and bench/results/ckpt.png.
set -euo pipefail
cd "$(dirname "$0")/../.."
MESHLOOM=${MESHLOOM:-build/app/meshloom}
[[ -x $MESHLOOM ]] || scripts/setup.sh >/dev/null
[[ -f data/prepared/pydocs.idx ]] || scripts/data/prepare_data.sh >/dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=bench/results
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
STEPS=${STEPS:-30}
cat >"$work/c.yaml" <<YAML
run: {steps: $STEPS, timeout: 120}
cluster: {roles: {constructors: 1, loaders: 1}}
model: {vocab_size: 50257, d_model: 256, n_layers: 4, n_heads: 8, n_kv_heads: 4, ffn_dim: 688}
data:
  seq_len: 1024
  tokens_per_step: 2048
  sources:
    - {name: pydocs, path: $PWD/data/prepared/pydocs}
    - {name: bible, path: $PWD/data/prepared/bible}
checkpoint: {keep: 3, full_every: 4}
YAML
run() {  # name sets...
  local name=$1; shift
  timeout 600 mpirun --oversubscribe --bind-to none -np 4 "$MESHLOOM" train -c "$work/c.yaml" \
    --set run.dir="$work/$name" "$@" >"$work/$name.log" 2>&1 || { cat "$work/$name.log"; exit 1; }
  # Mean step time over steps 5.. (the first steps warm up).
  /usr/bin/python3 -c '
import json, sys
rows = [r for r in map(json.loads, open(sys.argv[1])) if "step" in r][5:]
print(sum(max(t["step"] + t["wait"] for t in r["trainers"]) for r in rows) / len(rows))' "$work/$name/metrics.jsonl"
}
none=$(run none --set checkpoint.every=0)
bg10=$(run background10 --set checkpoint.every=10 --set checkpoint.background=true)
bg=$(run background --set checkpoint.every=1 --set checkpoint.background=true)
sync=$(run sync --set checkpoint.every=1 --set checkpoint.background=false)
sizes=$(grep -o 'written: [0-9.]* [KMG]iB' "$work/background.log" | awk '{print $2 $3}' | sort | uniq -c | tr '\n' ' ' || true)
lengths=$(for f in "$work"/background/checkpoints/step_*.h5; do "$MESHLOOM" inspect "$f" | sed -n "s/^  lengths *//p"; done || true)
echo "mode,mean_step_s,overhead_pct" >"$out/ckpt.csv"
printf '| checkpoints | mean step (s) | overhead |\n| --- | --- | --- |\n'
for row in "none $none" "background-every-10-steps $bg10" "background-every-step $bg" "synchronous-every-step $sync"; do
  read -r mode t <<<"$row"
  pct=$(awk -v a="$t" -v b="$none" 'BEGIN{printf "%.1f", 100*(a-b)/b}')
  echo "$mode,$t,$pct" >>"$out/ckpt.csv"
  printf '| %s | %.4f | %s%% |\n' "$mode" "$t" "$pct"
done
echo
echo "checkpoint file sizes (every step): $sizes"
echo "document lengths in the last checkpoints:"
echo "$lengths" | sed 's/^/  /'
/usr/bin/python3 - "$out/ckpt.csv" "$out/ckpt.png" <<'PY'
import csv, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
rows = list(csv.DictReader(open(sys.argv[1])))
plt.figure(figsize=(7, 3.4))
plt.bar([r["mode"] for r in rows], [float(r["mean_step_s"]) for r in rows], color=["#888", "#2a7", "#7c4", "#c54"])
plt.ylabel("mean step time (s)")
plt.title("cost of checkpoints")
plt.tight_layout()
plt.savefig(sys.argv[2], dpi=110)
PY
echo "wrote $out/ckpt.csv and $out/ckpt.png"
