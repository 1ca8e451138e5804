#!/usr/bin/env bash
# bench_step.sh: the CPU trainer's step, measured.
#  1. MFU of one trainer's forward + backward against the measured sgemm peak
#     (bench/model_bench: d 512, 8 layers, GPT-2 vocabulary, 4K tokens);
#  2. HDP vs the static DP x CP grid, measured step time on the same real
#     batches (4 trainers, CP rings for long documents);
#  3. the planner's cost model against reality: calibrate on one run's
#     measured micro-batches, predict another run's per-trainer step times,
#     at 4, 8, 12 and 16 ranks.
# Prints markdown tables; writes bench/results/step_*.csv and step_*.png.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD_DIR:-build}
MESHLOOM=$BUILD/app/meshloom
[[ -x $MESHLOOM && -x $BUILD/bench/model_bench ]] || scripts/setup.sh >/dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=bench/results
mkdir -p "$out" data/bench_step
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

# 1. MFU
"$BUILD/bench/model_bench" tokens=4096 d=512 layers=8 heads=8 kv_heads=8 ffn=1376 vocab=50257 \
  threads=2 iters=2 >"$work/mfu.txt" 2>&1
wall=$(sed -n 's/^MFU (wall clock, best iteration): \([0-9.]*\) GFLOP\/s = \([0-9.]*\)%.*/\1 \2/p' "$work/mfu.txt")
cpu=$(sed -n 's/^MFU (cpu-time based): *\([0-9.]*\) GFLOP\/s = \([0-9.]*\)%.*/\1 \2/p' "$work/mfu.txt")
peak=$(sed -n 's/.*of the 2-thread sgemm peak \([0-9.]*\).*/\1/p' "$work/mfu.txt" | head -1)
echo "part,metric,value" >"$out/step_mfu.csv"
read -r wg wp <<<"$wall"
read -r cg cp <<<"$cpu"
printf 'mfu,wall_gflops,%s\nmfu,wall_pct,%s\nmfu,cpu_gflops,%s\nmfu,cpu_pct,%s\nmfu,peak_gflops,%s\n' \
  "$wg" "$wp" "$cg" "$cp" "$peak" >>"$out/step_mfu.csv"
echo
echo "## 1. One trainer's step MFU (d 512, 8 layers, V 50257, 4096 tokens in 4 documents, 2 threads)"
echo
echo "| measured sgemm peak | step GFLOP/s (wall) | MFU (wall) | MFU (cpu time) |"
echo "| ---: | ---: | ---: | ---: |"
echo "| $peak GFLOP/s | $wg | **$wp%** | $cp% |"

# Real text, byte tokens, for parts 2 and 3.
if [[ ! -f data/bench_step/pydocs.idx ]]; then
  "$MESHLOOM" prepare --input /usr/share/doc/python3.11/html/_sources --format text \
    --tokenizer byte --out data/bench_step/pydocs >/dev/null
fi
cat >"$work/c.yaml" <<YAML
run: {timeout: 300, steps: 12}
cluster: {roles: {constructors: 1, loaders: 1}}
model: {vocab_size: 257, d_model: 256, n_layers: 2, n_heads: 4, n_kv_heads: 4, ffn_dim: 704}
data:
  seq_len: 4096
  sources: [{name: pydocs, path: $PWD/data/bench_step/pydocs}]
log: {metrics: true}
YAML
train() {  # name np sets...
  local name=$1 np=$2; shift 2
  timeout 900 mpirun --oversubscribe --bind-to none -np "$np" "$MESHLOOM" train -c "$work/c.yaml" \
    --set run.dir="$work/$name" "$@" >"$work/$name.log" 2>&1 || { tail -20 "$work/$name.log"; exit 1; }
}

# 2. HDP vs static on the same batches.
for p in hdp static; do
  train "$p" 6 --set plan.planner=$p --set plan.capacity=1024 --set data.tokens_per_step=16384
done
/usr/bin/python3 - "$work" "$out" <<'PY'
import json, sys, statistics as st
work, out = sys.argv[1], sys.argv[2]
def load(name):
    return [r for r in map(json.loads, open(f"{work}/{name}/metrics.jsonl")) if "step" in r]
h, s = load("hdp"), load("static")
assert [r["data_hash"] for r in h] == [r["data_hash"] for r in s], "different batches"
def wall(r): return max(t["step"] + t["wait"] for t in r["trainers"])
hw, sw = [wall(r) for r in h[2:]], [wall(r) for r in s[2:]]
hi, si = [r["imbalance"] for r in h[2:]], [r["imbalance"] for r in s[2:]]
with open(f"{out}/step_hdp_static.csv", "w") as f:
    f.write("step,hdp_s,static_s,hdp_imbalance,static_imbalance\n")
    for r1, r2 in zip(h, s):
        f.write(f"{r1['step']},{wall(r1):.4f},{wall(r2):.4f},{r1['imbalance']:.4f},{r2['imbalance']:.4f}\n")
print("\n## 2. HDP vs static, measured (4 trainers, capacity 1024, 16K-token steps of real text, steps 2-11)\n")
print("| planner | mean step | imbalance (max/mean compute) |")
print("| --- | ---: | ---: |")
print(f"| static | {st.mean(sw):.3f} s | {st.mean(si):.3f} |")
print(f"| hdp | {st.mean(hw):.3f} s | {st.mean(hi):.3f} |")
print(f"\nSame batches in both runs (data_hash of every step equal); HDP speedup {st.mean(sw)/st.mean(hw):.2f}x.")
PY

# 3. Cost model: calibrate on run A, predict run B (another seed: other batches).
echo "ranks,trainers,median_error,p90_error,a,b,g" >"$out/step_costmodel.csv"
for np in 4 8 12 16; do
  t=$((np - 2))
  sets=(--set data.tokens_per_step=$((2048 * t)) --set plan.capacity=2048)
  train "cal$np" "$np" "${sets[@]}"
  /usr/bin/python3 - "$work/cal$np/metrics.jsonl" "$work/cal$np.csv" <<'PY'
import json, sys
rows = [r for r in map(json.loads, open(sys.argv[1])) if "step" in r][2:]
with open(sys.argv[2], "w") as f:
    f.write("tokens,sum_l2,seconds\n")
    for r in rows:
        for t in r["trainers"]:
            for tokens, l2, k, sec in t["micro"]:
                if k == 1: f.write(f"{tokens:.0f},{l2:.0f},{sec:.6f}\n")
PY
  "$MESHLOOM" plan --calibrate "$work/cal$np.csv" >"$work/fit$np.txt"
  train "val$np" "$np" "${sets[@]}" --set run.seed=99 --set plan.calibration="$work/cal$np.csv"
  /usr/bin/python3 - "$work/val$np/metrics.jsonl" "$np" "$t" "$work/fit$np.txt" >>"$out/step_costmodel.csv" <<'PY'
import json, re, sys, statistics as st
rows = [r for r in map(json.loads, open(sys.argv[1])) if "step" in r][2:]
errs = sorted(abs(t["predicted"] - t["compute"]) / t["compute"]
              for r in rows for t in r["trainers"] if t["compute"] > 0)
fit = open(sys.argv[4]).read()
coef = [re.search(k + r"=([0-9.e+-]+)", fit) for k in ("a", "b", "g")]
print(sys.argv[2], sys.argv[3], f"{st.median(errs):.4f}", f"{errs[int(0.9 * (len(errs) - 1))]:.4f}",
      *[c.group(1) if c else "" for c in coef], sep=",")
PY
done
/usr/bin/python3 - "$out" <<'PY'
import csv, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
out = sys.argv[1]
rows = list(csv.DictReader(open(f"{out}/step_costmodel.csv")))
print("\n## 3. Cost model vs measured per-trainer step time (calibrated on one run, checked on another)\n")
print("| ranks | trainers | median error | 90th percentile error |")
print("| ---: | ---: | ---: | ---: |")
for r in rows:
    print(f"| {r['ranks']} | {r['trainers']} | {100*float(r['median_error']):.1f}% | {100*float(r['p90_error']):.1f}% |")
hs = list(csv.DictReader(open(f"{out}/step_hdp_static.csv")))
fig, ax = plt.subplots(1, 2, figsize=(11, 3.8))
ax[0].plot([int(r["step"]) for r in hs], [float(r["static_s"]) for r in hs], marker="o", label="static")
ax[0].plot([int(r["step"]) for r in hs], [float(r["hdp_s"]) for r in hs], marker="o", label="hdp")
ax[0].set(title="measured step time, same batches", xlabel="step", ylabel="s"); ax[0].legend()
ax[1].bar([r["ranks"] for r in rows], [100 * float(r["median_error"]) for r in rows], label="median")
ax[1].bar([r["ranks"] for r in rows], [100 * float(r["p90_error"]) for r in rows], alpha=0.4, label="p90")
ax[1].axhline(20, color="r", ls="--", lw=1); ax[1].set(title="cost model error", xlabel="ranks", ylabel="%")
ax[1].legend(); fig.tight_layout(); fig.savefig(f"{out}/step.png", dpi=110)
print(f"\nwrote {out}/step_mfu.csv, step_hdp_static.csv, step_costmodel.csv, step.png")
PY
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
