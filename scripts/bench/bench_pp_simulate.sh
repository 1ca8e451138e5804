#!/usr/bin/env bash
# bench_pp_simulate.sh: ByteScale's LLaMA-70B setting with pipelines,
# simulated (meshloom simulate --pp; lib/plan/simulate/simulate_pipeline.hpp). 8,192
# GPUs of 80 GB at TP 8, 2M context, 32M-token batches, GitHub and Byted
# lengths; the PP degree is the smallest that fits (--pp auto: each stage's
# state and pp micro-batches of activations in 90% of the GPU, and the static
# grid able to hold a 2M sequence). The same batches on three setups: the
# static 3D mesh (DP x CP grid of pipelines, equal micro-batch counts), HDP
# with DP-Balance, HDP with PP-Balance. Two machines: the simulator's default
# (312 TFLOP/s at MFU 0.45, 25 GB/s per GPU across nodes) and the one that
# reproduces ByteScale's LLaMA-7B case study (7 GB/s effective, MFU 0.27;
# docs/plan.md "The ByteScale case study"). Prints a markdown table with the
# paper's numbers beside; writes bench/results/pp_simulate.csv (a machine
# column first) and pp_simulate.png. STEPS batches each (8); about 15 s.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/bench/simulate_common.sh
csv=$out/pp_simulate.csv
rm -f "$csv"
for machine in default case-study; do
  for lengths in github byted; do
    echo "[pp_simulate] $machine $lengths" >&2
    rm -f "$tmp"
    # shellcheck disable=SC2086 # the machine's options are words
    "$MESHLOOM" simulate --model llama-70b --gpus 8192 --tp 8 --capacity auto --context 2M \
      --batch 32M --lengths "$lengths" --steps "${STEPS:-8}" --pp auto ${machines[$machine]} \
      --csv "$tmp" >"$out/pp_simulate_${machine}_${lengths}.txt"
    append_rows machine "$machine"
  done
done
sed -n '/^| pp |/,/^$/p' "$out/pp_simulate_default_github.txt"
/usr/bin/python3 - "$csv" "$out" <<'PY'
import csv, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
rows = list(csv.DictReader(open(sys.argv[1])))
out = sys.argv[2]
# ByteScale section 8 (its evaluation): the only per-setting numbers it states.
paper = {("github", "pp-balance"): "3.42-4.28x (70B/MoE, HDP+TP+PP)",
         ("byted", "pp-balance"): "up to 4.26x (all models)"}
r0 = rows[0]
print(f"{r0['model']}, {r0['gpus']} GPUs = {r0['pipelines']} pipelines x pp {r0['pp']} x TP {r0['tp']}, "
      f"C = {int(r0['capacity']) // 1024}K, 2M context, 32M-token batches\n")
print("| machine | lengths | setup | step time | speedup vs static | bubble | idle | "
      "micro-batches per pipeline | paper (GitHub/Byted at 2M) |")
print("| --- | --- | --- | ---: | ---: | ---: | ---: | --- | --- |")
for r in rows:
    setup = r["setup"] + (f" (CP {r['static_cp']})" if r["setup"] == "static" else "")
    print(f"| {r['machine']} | {r['lengths']} | {setup} | {float(r['step_s']):.1f} s | "
          f"{float(r['speedup_vs_static']):.2f}x | {100 * float(r['bubble']):.1f}% | "
          f"{100 * float(r['idle']):.1f}% | {r['mb_min']}-{r['mb_max']} | "
          f"{paper.get((r['lengths'], r['setup']), '')} |")
fig, ax = plt.subplots(figsize=(8, 4))
groups = list(dict.fromkeys((r["machine"], r["lengths"]) for r in rows))
setups = ["static", "dp-balance", "pp-balance"]
for j, s in enumerate(setups):
    xs = [i + (j - 1) * 0.27 for i in range(len(groups))]
    ys = [next(float(r["speedup_vs_static"]) for r in rows
               if (r["machine"], r["lengths"]) == g and r["setup"] == s) for g in groups]
    ax.bar(xs, ys, width=0.27, label=s)
for i, g in enumerate(groups):
    if g[1] == "github":
        ax.fill_between([i - 0.45, i + 0.45], 3.42, 4.28, color="grey", alpha=0.3,
                        label="paper: PP-Balance on GitHub, 3.42-4.28x" if i == 0 else None)
ax.set_xticks(range(len(groups)), [f"{m}\n{l}" for m, l in groups])
ax.set_ylabel("speedup over the static 3D mesh")
ax.legend(fontsize=8)
ax.set_title(f"LLaMA-70B, 8,192 GPUs (TP 8, pp {r0['pp']}), 2M context (meshloom simulate --pp)")
fig.tight_layout()
fig.savefig(f"{out}/pp_simulate.png", dpi=110)
PY
