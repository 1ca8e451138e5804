#!/usr/bin/env bash
# bench_pp.sh: PP-Balance against DP-Balance, measured on this machine.
# 2 + 2 x PIPES ranks: 1 constructor, 1 loader, PIPES pipelines of 2 stages
# (parallel.pp 2; 3 pipelines by default: 8 ranks), 1 thread each. Real
# long-tailed text as bytes (vocabulary 257, so attention is a large share
# of the work, as at long context; data/bench_step, prepared if missing):
# the Python docs and fortunes with a long policy (half of each step from
# documents over 2048 bytes, samples up to 4096), C = 2048, so the long
# samples run as CP rings of stages across pipelines, in both settings.
#   calib:  DP-Balance (plan.planner: bytescale), to calibrate the cost model:
#           each micro-batch's seconds summed over its pipeline's stages, a
#           ring's from its fastest member (calibration_csv.py)
#   dp:     DP-Balance with that calibration
#   pp:     plan.balance: pp with that calibration (PP-Balance's plan, or
#           hdp's where that is predicted faster: metrics' `planner`)
# dp and pp train the same batches (their data hashes are compared). Step
# time: the median over steps 1.. of the slowest trainer's step. Prediction:
# each pipeline's simulated 1F1B makespan (metrics.jsonl's `predicted`)
# against its measured one (the largest compute time of its trainers).
# `meshloom plan --config` predicts both on the same batches first
# ($out/pp_predicted.txt). Prints the table, writes bench/results/pp.csv
# and pp.png. Bubbles cost wall time only with a core per rank: on fewer
# cores than ranks a waiting stage gives its core away, so there each rank
# runs capped at an even share of the cores (core_share.sh, a cgroup CPU
# quota: a rank on a slower core of its own; CORE_SHARE= turns it off,
# CORE_SHARE=0.2 sets it).
#   scripts/bench/bench_pp.sh   (STEPS=8 TOKENS=32768 C=2048 SEQ=4096
#                                LONG=2048 PIPES=3 by default)
#   RUNS_TO=DIR ...   runs only, in DIR (config, metrics, logs, the machine's
#                     core count; each run's there as it goes), for a
#                     machine without matplotlib: the GPU bundle's `cpu`
#                     part runs it on the GPU machine's cores
#   RAW=DIR ...       no runs: the table and plot of the runs in DIR
set -euo pipefail
# shellcheck source=scripts/bench/train_common.sh
source "$(dirname "$0")/train_common.sh"
STEPS=${STEPS:-8} TOKENS=${TOKENS:-32768} C=${C:-2048} SEQ=${SEQ:-4096} LONG=${LONG:-2048}
PIPES=${PIPES:-3}
python=/usr/bin/python3
[[ -x $python ]] || python=python3
# RAW and RUNS_TO replace train_common's work folder (removed at exit).
if [[ -n ${RAW:-}${RUNS_TO:-} ]]; then
  rm -rf "$work" && trap - EXIT
  [[ -n ${RUNS_TO:-} ]] && mkdir -p "$RUNS_TO"
  work=$(cd "${RAW:-$RUNS_TO}" && pwd)
fi
if [[ -z ${RAW:-} ]]; then
[[ -f data/bench_step/pydocs.idx && -f data/bench_step/fortunes.idx ]] ||
  TOKENIZER=byte OUT=data/bench_step scripts/data/prepare_data.sh >/dev/null
cat >"$work/c.yaml" <<YAML
run: {steps: $STEPS, timeout: 600, threads: 1}
cluster: {roles: {constructors: 1, loaders: 1}}
model: {vocab_size: 257, d_model: 128, n_layers: 2, n_heads: 4, n_kv_heads: 2, ffn_dim: 352}
parallel: {pp: 2}
plan: {planner: bytescale, capacity: $C}
data:
  seq_len: $SEQ
  tokens_per_step: $TOKENS
  long_policy: {threshold: $LONG, share: 0.5}
  sources:
    - {name: pydocs, path: $PWD/data/bench_step/pydocs, format: indexed, weight: 1}
    - {name: fortunes, path: $PWD/data/bench_step/fortunes, format: indexed, weight: 3}
checkpoint: {every: 0}
YAML
run() { bench_train "$1" $((2 + 2 * PIPES)) "${@:2}"; }
CORE_SHARE=${CORE_SHARE-$(core_share_for $((2 + 2 * PIPES)))}
echo "$(nproc) cores${CORE_SHARE:+, each rank capped at $CORE_SHARE of a core}, $(hostname)" >"$work/machine.txt"
"$MESHLOOM" plan --config "$work/c.yaml" --trainers $((2 * PIPES)) --steps "$STEPS" \
  --set plan.balance=pp >"$work/predicted.txt" 2>&1 || { cat "$work/predicted.txt"; exit 1; }
run calib
# Each micro-batch once, its seconds summed over its pipeline's 2 stages; a
# ring's from its fastest member (the others' include waiting for it).
"$python" scripts/bench/calibration_csv.py --stages 2 --ring-fastest "$work/calib/metrics.jsonl" \
  "$work/calib.csv"
run dp --set plan.calibration="$work/calib.csv"
run pp --set plan.calibration="$work/calib.csv" --set plan.balance=pp
if [[ -n ${RUNS_TO:-} ]]; then
  echo "runs in $RUNS_TO (the table: RAW=$RUNS_TO $0)"
  exit 0
fi
fi
[[ -f $work/predicted.txt ]] && cp "$work/predicted.txt" "$out/pp_predicted.txt"
/usr/bin/python3 - "$work" "$out" "$STEPS" "$TOKENS" <<'PY'
import json, statistics, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
work, out, steps, tokens = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def steps_of(name):
    return [r for r in (json.loads(l) for l in open(f"{work}/{name}/metrics.jsonl"))
            if "step" in r and r["step"] >= 1]
runs = {n: steps_of(n) for n in ("dp", "pp")}
for a, b in zip(runs["dp"], runs["pp"]):
    assert a["data_hash"] == b["data_hash"], f"step {a['step']}: other data"
labels = {"dp": "DP-Balance (bytescale)", "pp": "plan.balance: pp"}
rows, errors = {}, {}
for name, rs in runs.items():
    pipes = []  # (predicted, measured) per pipeline and step
    micro = []
    predicted_steps = []  # the slowest pipeline's predicted makespan per step
    for r in rs:
        predicted_steps.append(max(t["predicted"] for t in r["trainers"]))
        by_pipe = {}
        for t in r["trainers"]:
            p = by_pipe.setdefault(t["trainer"] // 2, [t["predicted"], 0.0, len(t["micro"])])
            p[1] = max(p[1], t["compute"])
        pipes += [(v[0], v[1]) for v in by_pipe.values()]
        micro += [v[2] for v in by_pipe.values()]
    err = [abs(p - m) / m for p, m in pipes if m > 0]
    errors[name] = err
    rows[name] = dict(step=statistics.median(r["seconds"] for r in rs),
                      predicted=statistics.median(predicted_steps),
                      within=sum(e <= 0.2 for e in err) / len(err), mean_err=statistics.mean(err),
                      micro_min=min(micro), micro_max=max(micro), loss=rs[-1]["loss"])
base, pbase = rows["dp"]["step"], rows["dp"]["predicted"]
print(f"| scheduler | step (median, steps 1-{steps - 1}) | vs DP-Balance | predicted step (1F1B) | "
      "predicted vs DP-Balance | micro-batches per pipeline | predicted pipeline time within 20% | "
      "mean prediction error |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
with open(f"{out}/pp.csv", "w") as f:
    f.write("scheduler,step_seconds,speedup_vs_dp,predicted_step_seconds,predicted_speedup_vs_dp,"
            "micro_min,micro_max,within_20pct,mean_error,last_loss\n")
    for n in ("dp", "pp"):
        r = rows[n]
        print(f"| {labels[n]} | {r['step']:.2f} s | {base / r['step']:.2f}x | {r['predicted']:.2f} s | "
              f"{pbase / r['predicted']:.2f}x | {r['micro_min']}-{r['micro_max']} | "
              f"{100 * r['within']:.0f}% | {100 * r['mean_err']:.0f}% |")
        f.write(f"{n},{r['step']:.4f},{base / r['step']:.4f},{r['predicted']:.4f},"
                f"{pbase / r['predicted']:.4f},{r['micro_min']},{r['micro_max']},"
                f"{r['within']:.4f},{r['mean_err']:.4f},{r['loss']:.6f}\n")
print(f"same batches in both (data hashes equal over {len(runs['dp'])} steps)")
taken = [r.get("planner", "?") for r in runs["pp"]]
print("plan.balance: pp took " + ", ".join(f"{n}'s plan on {taken.count(n)}" for n in sorted(set(taken)))
      + f" of {len(taken)} steps")
fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6))
for n, c in (("dp", "tab:blue"), ("pp", "tab:orange")):
    a.plot([r["step"] for r in runs[n]], [r["seconds"] for r in runs[n]], "o-", c=c, label=labels[n])
a.set_xlabel("step"); a.set_ylabel("seconds"); a.set_title(f"step time, {tokens} tokens/step"); a.legend()
b.hist([100 * e for e in errors["dp"]], bins=20, alpha=0.6, label=labels["dp"])
b.hist([100 * e for e in errors["pp"]], bins=20, alpha=0.6, label=labels["pp"])
b.axvline(20, ls="--", c="gray")
b.set_xlabel("|predicted - measured| / measured, per pipeline and step (%)"); b.legend()
machine = open(f"{work}/machine.txt").read().strip()
pipes = max(t["trainer"] for t in runs["dp"][0]["trainers"]) // 2 + 1
fig.suptitle(f"{pipes} pipelines x 2 stages, {2 * pipes} trainers + 2 ranks on {machine}")
fig.tight_layout(); fig.savefig(f"{out}/pp.png", dpi=120)
print(f"wrote {out}/pp.csv and {out}/pp.png")
PY
