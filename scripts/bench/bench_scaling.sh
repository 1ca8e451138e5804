#!/usr/bin/env bash
# bench_scaling.sh: simulated weak and strong scaling of HDP and the static
# DP x CP grid up to 12,288 trainers (meshloom simulate: LLaMA-7B, 2M context,
# byted lengths, 8K tokens per trainer, A100-class defaults).
#   weak:   the global batch grows with the trainers (T x C x 8 tokens)
#   strong: a fixed 96M-token global batch over more and more trainers
# Prints markdown tables, writes bench/results/scaling.csv and scaling.png.
set -euo pipefail
cd "$(dirname "$0")/../.."
MESHLOOM=${MESHLOOM:-build/app/meshloom}
[[ -x $MESHLOOM ]] || scripts/setup.sh >/dev/null
out=bench/results
mkdir -p "$out"
csv=$out/scaling_raw.csv
rm -f "$csv"
LENGTHS=${LENGTHS:-byted}
common=(--model llama-7b --context 2M --capacity 8K --lengths "$LENGTHS" --planners static,hdp
        --steps "${STEPS:-2}" --no-validate --csv "$csv")
for T in 256 1024 4096 12288; do
  echo "[scaling] weak T=$T" >&2
  "$MESHLOOM" simulate "${common[@]}" --trainers "$T" --batch $((T * 8192 * 8)) >/dev/null
done
for T in 1024 2048 4096 8192 12288; do
  echo "[scaling] strong T=$T" >&2
  "$MESHLOOM" simulate "${common[@]}" --trainers "$T" --batch 96M >/dev/null
done
/usr/bin/python3 - "$csv" "$out" <<'PY'
import csv, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
rows = list(csv.DictReader(open(sys.argv[1])))
out = sys.argv[2]
strong_batch = 96 * 2**20
series = {}
for r in rows:
    T, batch = int(r["trainers"]), int(r["batch"])
    kind = "strong" if batch == strong_batch and not (batch == T * 8192 * 8) else "weak"
    series.setdefault(kind, {}).setdefault(r["planner"], []).append(
        (T, float(r["step_s"]), batch, float(r["imbalance"]), float(r["planning_ms_median"])))
with open(f"{out}/scaling.csv", "w") as f:
    f.write("kind,planner,trainers,batch_tokens,step_s,tokens_per_s,imbalance,planning_ms\n")
    for kind, by in series.items():
        for planner, pts in by.items():
            for T, s, b, imb, ms in pts:
                f.write(f"{kind},{planner},{T},{b},{s:.4f},{b / s:.0f},{imb:.4f},{ms:.2f}\n")
fig, ax = plt.subplots(1, 2, figsize=(11, 4))
for i, kind in enumerate(("weak", "strong")):
    for planner, pts in sorted(series.get(kind, {}).items()):
        pts.sort()
        ax[i].plot([p[0] for p in pts], [p[2] / p[1] / 1e6 for p in pts], marker="o", label=planner)
    ax[i].set(xscale="log", xlabel="trainers", ylabel="M tokens/s",
              title=f"{kind} scaling ({'T x 64K tokens' if kind == 'weak' else '96M tokens'} per step)")
    ax[i].legend()
fig.tight_layout()
fig.savefig(f"{out}/scaling.png", dpi=110)
for kind in ("weak", "strong"):
    by = series.get(kind, {})
    print(f"\n{kind} scaling (simulated, LLaMA-7B, 2M context, byted):\n")
    print("| trainers | batch tokens | static step | hdp step | speedup | static M tok/s | hdp M tok/s | hdp imbalance | hdp planning ms |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    st = {p[0]: p for p in by.get("static", [])}
    for T, s, b, imb, ms in sorted(by.get("hdp", [])):
        if T not in st:
            continue
        s0 = st[T][1]
        print(f"| {T} | {b/2**20:.0f}M | {s0:.1f} s | {s:.1f} s | {s0/s:.2f}x | {b/s0/1e6:.2f} | {b/s/1e6:.2f} | {imb:.3f} | {ms:.1f} |")
print(f"\nwrote {out}/scaling.csv and {out}/scaling.png")
PY
