#!/usr/bin/env bash
# bench_tp_capacity.sh: what tensor parallelism buys in capacity, simulated.
# meshloom simulate --capacity auto gives each trainer (a TP group) the most
# tokens TP rank 0 fits in 90% of an 80 GB GPU (plan/cost/device_memory.hpp: bf16
# weights, fp32 gradients, ZeRO-1 moments, activations, logits, ring buffers;
# sharded tp ways where Megatron's layers shard them), then plans the same
# batches (2M context, byted lengths, 32M-token batch, 1,024 GPUs) with the
# static DP x CP grid and HDP. A larger C means fewer split sequences and
# less ring traffic. Prints a markdown table; writes
# bench/results/tp_capacity.csv and tp_capacity.png. About a minute.
set -euo pipefail
cd "$(dirname "$0")/../.."
MESHLOOM=${MESHLOOM:-build/app/meshloom}
[[ -x $MESHLOOM ]] || scripts/setup.sh >/dev/null
out=bench/results
mkdir -p "$out"
csv=$out/tp_capacity.csv
rm -f "$csv"
for model in llama-7b llama-13b llama-30b; do
  for tp in 1 2 4 8; do
    echo "[tp_capacity] $model tp $tp" >&2
    # A model whose state does not fit at this TP is a row of its own.
    if ! msg=$("$MESHLOOM" simulate --model "$model" --gpus 1024 --tp "$tp" --capacity auto \
      --steps "${STEPS:-2}" --planners static,hdp --no-validate --csv "$csv" 2>&1 >/dev/null); then
      echo "$model,1024,$tp,0,0,,,,,does not fit,,,,,,,,,,," >>"$csv"
      echo "  $msg" >&2
    fi
  done
done
/usr/bin/python3 - "$csv" "$out" <<'PY'
import csv, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
rows = list(csv.DictReader(open(sys.argv[1])))
out = sys.argv[2]
table = {}
for r in rows:
    key = (r["model"], int(r["tp"]))
    t = table.setdefault(key, {"capacity": int(r["capacity"] or 0)})
    if r["planner"] in ("static", "hdp"):
        t[r["planner"]] = float(r["step_s"])
print("| model | TP | capacity C per trainer | static grid step | HDP step | HDP vs static |")
print("| --- | ---: | ---: | ---: | ---: | ---: |")
for (model, tp), t in table.items():
    if not t["capacity"]:
        print(f"| {model} | {tp} | does not fit | | | |")
        continue
    s, h = t.get("static"), t.get("hdp")
    cap = f"{t['capacity'] // 1024}K"
    if not (s and h):
        # The longest (2M) sequence needs more trainers of C than there are.
        need = -(-2 * 2**20 // t["capacity"])
        print(f"| {model} | {tp} | {cap} | no plan: 2M / C = {need} trainers > {1024 // tp} | | |")
        continue
    print(f"| {model} | {tp} | {cap} | {s:.1f} s | {h:.1f} s | {s / h:.2f}x |")
fig, ax = plt.subplots(1, 2, figsize=(10, 4))
for i, model in enumerate(dict.fromkeys(m for m, _ in table)):
    color = f"C{i}"
    tps = [tp for (m, tp), t in table.items() if m == model and t["capacity"]]
    ax[0].plot(tps, [table[(model, tp)]["capacity"] / 1024 for tp in tps], "o-", color=color,
               label=model)
    planned = [tp for tp in tps if table[(model, tp)].get("hdp")]
    ax[1].plot(planned, [table[(model, tp)]["hdp"] for tp in planned], "o-", color=color,
               label=f"{model} HDP")
    ax[1].plot(planned, [table[(model, tp)]["static"] for tp in planned], "x--", color=color,
               label=f"{model} static grid")
for a in ax:
    a.set_xscale("log", base=2)
    a.set_xlabel("TP degree (GPUs per trainer)")
    a.legend(fontsize=7)
ax[0].set_ylabel("capacity C per trainer (K tokens)")
ax[1].set_ylabel("simulated step time (s)")
fig.suptitle("1,024 GPUs of 80 GB, 2M context, byted lengths (meshloom simulate --capacity auto)")
fig.tight_layout()
fig.savefig(f"{out}/tp_capacity.png", dpi=110)
PY
