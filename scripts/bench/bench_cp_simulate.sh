#!/usr/bin/env bash
# bench_cp_simulate.sh: ring-only CP against the per-group choice of ring,
# Ulysses and hybrid (plan.cp_algorithm: auto; lib/plan/cp_algorithm.hpp),
# simulated at ByteScale's LLaMA-7B setting: 1,024 GPUs, 8 per node, 2M
# context, C = 8K tokens per trainer, 32M-token batches, byted and github
# lengths, TP 1 and 2 (the case study's; 4 trainers a node). The static
# DP x CP grid and HDP plan the same batches with --cp-algorithm ring and
# auto; the groups are the planners' either way, only how each runs
# attention changes. Two machines: the simulator's default (312 TFLOP/s at
# MFU 0.45, 25 GB/s per GPU across nodes, 150 GB/s NVLink) and the case
# study's (7 GB/s effective, MFU 0.27; docs/plan.md). Prints a markdown
# table; writes bench/results/cp_simulate.csv (machine and setting columns
# first), cp_simulate.md (the table) and cp_simulate.png. STEPS batches each
# (5); TPS (1 2); about 20 s.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/bench/simulate_common.sh
csv=$out/cp_simulate.csv
rm -f "$csv"
for machine in default case-study; do
  for tp in ${TPS:-1 2}; do
    for lengths in byted github; do
      for cp in ring auto; do
        echo "[cp_simulate] $machine tp $tp $lengths $cp" >&2
        rm -f "$tmp"
        # shellcheck disable=SC2086 # the machine's options are words
        "$MESHLOOM" simulate --model llama-7b --gpus 1024 --gpus-per-node 8 --tp "$tp" \
          --capacity 8K --context 2M --batch 32M --lengths "$lengths" --steps "${STEPS:-5}" \
          --planners static,hdp --cp-algorithm "$cp" ${machines[$machine]} --csv "$tmp" \
          >"$out/cp_simulate_${machine}_tp${tp}_${lengths}_${cp}.txt"
        append_rows machine "$machine"
      done
    done
  done
done
/usr/bin/python3 - "$csv" "$out" <<'PY' | tee "$out/cp_simulate.md"
import csv, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
rows = list(csv.DictReader(open(sys.argv[1])))
out = sys.argv[2]
by = {(r["machine"], r["tp"], r["lengths"], r["planner"], r["cp_algorithm"]): r for r in rows}
keys = list(dict.fromkeys((r["machine"], r["tp"], r["lengths"], r["planner"]) for r in rows))
def secs(x):
    x = float(x)
    return f"{x:.1f} s" if x < 120 else f"{int(x // 60)}m{int(round(x % 60)):02d}s"
print("LLaMA-7B, 1,024 GPUs, 8 per node, C = 8K per trainer, 2M context, 32M-token batches "
      f"({rows[0]['sequences']} sequences a step for the first row)\n")
print("| machine | TP | lengths | planner | step, ring | step, auto | auto / ring | "
      "hdp vs static (ring / auto) | auto: split sequences per step | all-to-all / step |")
print("| --- | ---: | --- | --- | ---: | ---: | ---: | --- | --- | ---: |")
speed = {}
for m, tp, lengths, planner in keys:
    ring, auto = by[(m, tp, lengths, planner, "ring")], by[(m, tp, lengths, planner, "auto")]
    gain = float(ring["step_s"]) / float(auto["step_s"])
    speed[(m, tp, lengths, planner)] = gain
    vs = ""
    if planner == "hdp":
        vs = " / ".join(f"{float(by[(m, tp, lengths, 'static', c)]['step_s']) / float(by[(m, tp, lengths, 'hdp', c)]['step_s']):.2f}x"
                        for c in ("ring", "auto"))
    print(f"| {m} | {tp} | {lengths} | {planner} | {secs(ring['step_s'])} | {secs(auto['step_s'])} | "
          f"{gain:.2f}x | {vs} | {auto['cp_mix'].replace(';', ',')} | "
          f"{float(auto['a2a_bytes']) / 2**40:.1f} TiB |")
fig, ax = plt.subplots(figsize=(9, 4))
groups = list(dict.fromkeys(k[:3] for k in keys))
for j, planner in enumerate(["static", "hdp"]):
    xs = [i + (j - 0.5) * 0.38 for i in range(len(groups))]
    ax.bar(xs, [speed[g + (planner,)] for g in groups], width=0.38, label=planner)
ax.axhline(1.0, color="grey", lw=0.8)
ax.set_xticks(range(len(groups)), [f"{m}\nTP {tp}\n{l}" for m, tp, l in groups], fontsize=8)
ax.set_ylabel("step time, ring-only / auto")
ax.legend(fontsize=8)
ax.set_title("Per-group CP algorithm (auto) over ring-only, LLaMA-7B, 1,024 GPUs, 2M context")
fig.tight_layout()
fig.savefig(f"{out}/cp_simulate.png", dpi=110)
PY
