#!/usr/bin/env bash
# bench_tp.sh: tensor parallelism on this machine's cores. The same model
# (d 512, 8 layers, 8 heads, FFN 1376, GPT-2's vocabulary; the issue's
# reference shape) and the same batches, trained as
#   tp1:    one trainer with 2 threads
#   tp2:    one TP group of 2 trainers with 1 thread each
#   tp2_sp: the same with sequence parallelism (parallel.sequence_parallel)
# Speed: STEPS steps of TOKENS tokens (one micro-batch per step); tokens/s is
# the median over the steps after the first two (warm-up).
# Memory: one step of one micro-batch of MEM_TOKENS tokens in each setting;
# the peak RSS of a trainer rank (the larger of a group's two), as the run's
# metrics report it (getrusage at the end: weights, gradients, AdamW moments
# and the activations the model reserves for its largest micro-batch).
# Prints both tables, writes bench/results/tp.csv, tp_memory.csv and tp.png.
#   scripts/bench/bench_tp.sh   (STEPS=8 TOKENS=4096 MEM_TOKENS=16384 by default)
set -euo pipefail
cd "$(dirname "$0")/../.."
MESHLOOM=${MESHLOOM:-build/app/meshloom}
[[ -x $MESHLOOM ]] || scripts/setup.sh >/dev/null
[[ -f data/prepared/pydocs.idx ]] || scripts/data/prepare_data.sh >/dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
STEPS=${STEPS:-8} TOKENS=${TOKENS:-4096} MEM_TOKENS=${MEM_TOKENS:-16384}
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
  sources: [{name: pydocs, path: $PWD/data/prepared/pydocs, format: indexed}]
checkpoint: {every: 0}
YAML
run() {  # name trainers threads tp sequence-parallel [train arguments...]
  echo "[bench_tp] $1: $2 trainer(s) x $3 thread(s), tp $4, sequence parallel $5" >&2
  local name=$1 trainers=$2 threads=$3 tp=$4 sp=$5
  shift 5
  mpirun --oversubscribe --bind-to none -np $((2 + trainers)) "$MESHLOOM" train -c "$work/c.yaml" \
    --set run.dir="$work/$name" --set run.threads="$threads" --set parallel.tp="$tp" \
    --set parallel.sequence_parallel="$sp" "$@" >"$work/$name.log" 2>&1 ||
    { cat "$work/$name.log"; exit 1; }
}
one_batch=(--set run.steps=1 --set plan.capacity="$MEM_TOKENS" --set data.seq_len="$MEM_TOKENS"
  --set data.tokens_per_step="$MEM_TOKENS")
run tp1 1 2 1 false
run tp2 2 1 2 false
run tp2_sp 2 1 2 true
run mem_tp1 1 2 1 false "${one_batch[@]}"
run mem_tp2 2 1 2 false "${one_batch[@]}"
run mem_tp2_sp 2 1 2 true "${one_batch[@]}"
/usr/bin/python3 - "$work" "$out" "$STEPS" "$TOKENS" "$MEM_TOKENS" <<'PY'
import json, statistics, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
work, out, steps, tokens, mem_tokens = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
names = ("tp1", "tp2", "tp2_sp")
labels = {"tp1": "tp 1: 1 trainer x 2 threads", "tp2": "tp 2: 2 trainers x 1 thread",
          "tp2_sp": "tp 2 + sequence parallel"}
short = {"tp1": "tp 1\n1 x 2 threads", "tp2": "tp 2\n2 x 1 thread", "tp2_sp": "tp 2 + SP\n2 x 1 thread"}
def records(name):
    return [json.loads(line) for line in open(f"{work}/{name}/metrics.jsonl")]
speed = {}
for name in names:
    rs = [r for r in records(name) if "step" in r and "tokens_per_s" in r]
    speed[name] = (statistics.median(r["tokens_per_s"] for r in rs if r["step"] >= 2), rs[-1]["loss"])
rss = {}  # the largest trainer's peak RSS, MiB
for name in names:
    final = [r for r in records("mem_" + name) if r.get("final")][-1]
    rss[name] = max(r["peak_rss_kib"] for r in final["ranks"] if r["role"] == "trainer") / 1024
base = speed["tp1"][0]
print(f"| setting | tokens/s (median, steps 2-{steps - 1}) | vs tp1 | last loss |")
print("| --- | --- | --- | --- |")
with open(f"{out}/tp.csv", "w") as f:
    f.write("setting,tokens_per_s,ratio,last_loss\n")
    for name in names:
        tps, loss = speed[name]
        print(f"| {labels[name]} | {tps:.0f} | {tps / base:.2f} | {loss:.4f} |")
        f.write(f"{name},{tps:.1f},{tps / base:.4f},{loss:.6f}\n")
print()
print(f"| setting | peak RSS of a trainer, one micro-batch of {mem_tokens} tokens | vs tp 2 |")
print("| --- | --- | --- |")
with open(f"{out}/tp_memory.csv", "w") as f:
    f.write("setting,tokens,peak_rss_mib,ratio_to_tp2\n")
    for name in names:
        print(f"| {labels[name]} | {rss[name]:.0f} MiB | {rss[name] / rss['tp2']:.2f} |")
        f.write(f"{name},{mem_tokens},{rss[name]:.1f},{rss[name] / rss['tp2']:.4f}\n")
fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.2))
a.bar([short[n] for n in names], [speed[n][0] for n in names])
a.axhline(0.85 * base, ls="--", c="gray", label="85% of tp 1")
a.set_ylabel("tokens/s"); a.set_title(f"{tokens} tokens/step"); a.legend()
b.bar([short[n] for n in names], [rss[n] for n in names], color="tab:orange")
b.set_ylabel("peak RSS of a trainer (MiB)"); b.set_title(f"one micro-batch of {mem_tokens} tokens")
fig.suptitle("d 512, 8 layers, V 50257")
fig.tight_layout(); fig.savefig(f"{out}/tp.png", dpi=120)
print(f"wrote {out}/tp.csv, {out}/tp_memory.csv and {out}/tp.png")
PY
