#!/usr/bin/env bash
# bench_throughput.sh: measured end-to-end training throughput on this
# machine at 2 to 16 ranks (the whole system: data plane, loaders,
# constructors, planner, trainers). Weak scaling: each trainer gets 2048
# tokens per step of real text (Python docs, byte tokens), d 256, 2 layers.
# Prints a markdown table; writes bench/results/throughput.csv and .png.
# Progress, one line per run, goes to stderr (about 2 minutes in all).
set -euo pipefail
cd "$(dirname "$0")/../.."
MESHLOOM=${MESHLOOM:-build/app/meshloom}
[[ -x $MESHLOOM ]] || scripts/setup.sh >/dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=bench/results
mkdir -p "$out" data/bench_step
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
[[ -f data/bench_step/pydocs.idx ]] || echo "[throughput] preparing data/bench_step/pydocs (byte tokens)" >&2
[[ -f data/bench_step/pydocs.idx ]] || "$MESHLOOM" prepare --input /usr/share/doc/python3.11/html/_sources \
  --format text --tokenizer byte --out data/bench_step/pydocs >/dev/null
cat >"$work/c.yaml" <<YAML
run: {timeout: 300, steps: 10}
model: {vocab_size: 257, d_model: 256, n_layers: 2, n_heads: 4, n_kv_heads: 4, ffn_dim: 704}
plan: {capacity: 2048}
data:
  seq_len: 2048
  sources: [{name: pydocs, path: $PWD/data/bench_step/pydocs}]
YAML
echo "ranks,constructors,loaders,trainers,tokens_per_step,tokens_per_s,mean_step_s" >"$out/throughput.csv"
for np in 2 4 8 12 16; do
  if ((np == 2)); then roles=(--set cluster.roles.loaders=0 --set data.mode=colocated); k=1; l=0
  else roles=(--set cluster.roles.loaders=1); k=1; l=1; fi
  t=$((np - k - l))
  echo "[throughput] $np ranks: $k constructor, $l loader(s), $t trainer(s), 10 steps" >&2
  timeout 600 mpirun --oversubscribe --bind-to none -np $np "$MESHLOOM" train -c "$work/c.yaml" \
    "${roles[@]}" --set data.tokens_per_step=$((2048 * t)) --set run.dir="$work/r$np" \
    >"$work/r$np.log" 2>&1 || { tail -20 "$work/r$np.log"; exit 1; }
  /usr/bin/python3 - "$work/r$np/metrics.jsonl" $np $k $l $t >>"$out/throughput.csv" <<'PY'
import json, sys
rows = [r for r in map(json.loads, open(sys.argv[1])) if "step" in r][2:]
wall = [max(t["step"] + t["wait"] for t in r["trainers"]) for r in rows]
tokens = rows[0]["tokens"]
mean = sum(wall) / len(wall)
print(*sys.argv[2:6], tokens, round(tokens / mean), f"{mean:.4f}", sep=",")
PY
done
/usr/bin/python3 - "$out" <<'PY'
import csv, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
out = sys.argv[1]
rows = list(csv.DictReader(open(f"{out}/throughput.csv")))
print("| ranks | constructors | loaders | trainers | tokens/step | mean step | tokens/s |")
print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for r in rows:
    print(f"| {r['ranks']} | {r['constructors']} | {r['loaders']} | {r['trainers']} | {r['tokens_per_step']} | {float(r['mean_step_s']):.3f} s | {r['tokens_per_s']} |")
plt.figure(figsize=(6, 3.6))
plt.plot([int(r["ranks"]) for r in rows], [int(r["tokens_per_s"]) for r in rows], marker="o")
plt.xlabel("ranks (2 cores)"); plt.ylabel("tokens/s"); plt.title("measured end-to-end training throughput")
plt.tight_layout(); plt.savefig(f"{out}/throughput.png", dpi=110)
print(f"\nwrote {out}/throughput.csv and {out}/throughput.png")
PY
