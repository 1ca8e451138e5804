#!/usr/bin/env bash
# bench_tp.sh: tensor parallelism on this machine's cores. The same model
# (d 512, 8 layers, 8 heads, FFN 1376, GPT-2's vocabulary; the issue's
# reference shape) and the same batches, trained as
#   tp1: one trainer with 2 threads
#   tp2: one TP group of 2 trainers with 1 thread each
# for STEPS steps of TOKENS tokens (one micro-batch per step); tokens/s is the
# median over the steps after the first two (warm-up). Prints a table, writes
# bench/results/tp.csv and tp.png.
#   scripts/bench/bench_tp.sh            (STEPS=8 TOKENS=4096 by default)
set -euo pipefail
cd "$(dirname "$0")/../.."
MESHLOOM=${MESHLOOM:-build/app/meshloom}
[[ -x $MESHLOOM ]] || scripts/setup.sh >/dev/null
[[ -f data/prepared/pydocs.idx ]] || scripts/data/prepare_data.sh >/dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
STEPS=${STEPS:-8} TOKENS=${TOKENS:-4096}
out=bench/results
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/c.yaml" <<YAML
run: {steps: $STEPS, timeout: 600}
cluster: {roles: {constructors: 1, loaders: 1}}
model: {vocab_size: 50257, d_model: 512, n_layers: 8, n_heads: 8, n_kv_heads: 8, ffn_dim: 1376}
plan: {capacity: $TOKENS}
data:
  seq_len: $TOKENS
  tokens_per_step: $TOKENS
  sources: [{name: pydocs, path: data/prepared/pydocs, format: indexed}]
checkpoint: {every: 0}
YAML
run() {  # name trainers threads tp
  echo "[bench_tp] $1: $2 trainer(s) x $3 thread(s), tp $4" >&2
  mpirun --oversubscribe --bind-to none -np $((2 + $2)) "$MESHLOOM" train -c "$work/c.yaml" \
    --set run.dir="$work/$1" --set run.threads="$3" --set parallel.tp="$4" >"$work/$1.log" 2>&1 ||
    { cat "$work/$1.log"; exit 1; }
}
run tp1 1 2 1
run tp2 2 1 2
/usr/bin/python3 - "$work" "$out" "$STEPS" "$TOKENS" <<'PY'
import json, statistics, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
work, out, steps, tokens = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rows = {}
for name in ("tp1", "tp2"):
    per_step, losses = [], []
    for line in open(f"{work}/{name}/metrics.jsonl"):
        r = json.loads(line)
        if "step" in r and "tokens_per_s" in r:
            if r["step"] >= 2: per_step.append(r["tokens_per_s"])
            losses.append(r["loss"])
    rows[name] = (statistics.median(per_step), losses)
base = rows["tp1"][0]
print(f"| setting | tokens/s (median, steps 2-{steps - 1}) | vs tp1 | last loss |")
print("| --- | --- | --- | --- |")
with open(f"{out}/tp.csv", "w") as f:
    f.write("setting,tokens_per_s,ratio,last_loss\n")
    for name, label in (("tp1", "tp 1: 1 trainer x 2 threads"), ("tp2", "tp 2: 2 trainers x 1 thread")):
        tps, losses = rows[name]
        print(f"| {label} | {tps:.0f} | {tps / base:.2f} | {losses[-1]:.4f} |")
        f.write(f"{name},{tps:.1f},{tps / base:.4f},{losses[-1]:.6f}\n")
plt.figure(figsize=(5, 3))
plt.bar(["tp 1\n1 x 2 threads", "tp 2\n2 x 1 thread"], [rows["tp1"][0], rows["tp2"][0]])
plt.axhline(0.85 * base, ls="--", c="gray", label="85% of tp 1")
plt.ylabel("tokens/s"); plt.title(f"d 512, 8 layers, V 50257, {tokens} tokens/step"); plt.legend()
plt.tight_layout(); plt.savefig(f"{out}/tp.png", dpi=120)
print(f"wrote {out}/tp.csv and {out}/tp.png")
PY
