#!/usr/bin/env bash
# bench_cp.sh: ring, Ulysses and hybrid CP attention, measured on this
# machine. 6 ranks: 1 constructor, 1 loader, 4 trainers (1 thread each,
# sharing the cores). Real long-tailed data: the quickstart corpora with a
# long policy (half of each step from documents over 2048 tokens, samples up
# to 4096), C = 1024, so long samples are split over 2 to 4 trainers. A model
# of d 256 with 8 query and 4 KV heads (Ulysses needs the group size to
# divide the heads).
#   calib:   plan.cp_algorithm: ring, to calibrate the cost model from its
#            measured micro-batches (meshloom's own calibration CSV)
#   ring, ulysses, hybrid, auto:  with that calibration
# All train the same batches (their data hashes are compared). Step time:
# the median over steps 1.. of the slowest trainer's step. Prediction: each
# trainer's planned time (metrics.jsonl's `predicted`, the plan's cost of
# its micro-batches with the chosen attention) against its measured compute.
# Prints the table, writes bench/results/cp.csv and cp.png.
#   scripts/bench/bench_cp.sh   (STEPS=6 TOKENS=16384 by default)
set -euo pipefail
# shellcheck source=scripts/bench/train_common.sh
source "$(dirname "$0")/train_common.sh"
STEPS=${STEPS:-6} TOKENS=${TOKENS:-16384}
cat >"$work/c.yaml" <<YAML
run: {steps: $STEPS, timeout: 600, threads: 1}
cluster: {roles: {constructors: 1, loaders: 1}}
model: {vocab_size: 50257, d_model: 256, n_layers: 4, n_heads: 8, n_kv_heads: 4, ffn_dim: 688}
plan: {capacity: 1024}
data:
  seq_len: 4096
  tokens_per_step: $TOKENS
  long_policy: {threshold: 2048, share: 0.5}
  sources:
    - {name: pydocs, path: $PWD/data/prepared/pydocs, format: indexed, weight: 3}
    - {name: bible, path: $PWD/data/prepared/bible, format: indexed, weight: 1}
checkpoint: {every: 0}
YAML
run() { bench_train "$1" 6 "${@:2}"; }
run calib
/usr/bin/python3 scripts/bench/calibration_csv.py "$work/calib/metrics.jsonl" "$work/calib.csv"
for algo in ring ulysses hybrid auto; do
  run "$algo" --set plan.calibration="$work/calib.csv" --set plan.cp_algorithm="$algo"
done
/usr/bin/python3 - "$work" "$out" "$STEPS" "$TOKENS" <<'PY'
import json, re, statistics, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
work, out, steps, tokens = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
names = ("ring", "ulysses", "hybrid", "auto")
def steps_of(name):
    return [r for r in (json.loads(l) for l in open(f"{work}/{name}/metrics.jsonl"))
            if "step" in r and r["step"] >= 1]
runs = {n: steps_of(n) for n in names}
for n in names[1:]:
    for a, b in zip(runs["ring"], runs[n]):
        assert a["data_hash"] == b["data_hash"], f"{n}, step {a['step']}: other data"
def mix(name):  # what the lead logged: the CP attention of step 0's groups
    m = re.search(r"CP attention of the split sequences .*?: (.*)", open(f"{work}/{name}.log").read())
    return m.group(1).strip() if m else "ring (all)"
rows, errors = {}, {}
for n, rs in runs.items():
    err = [abs(t["predicted"] - t["compute"]) / t["compute"] for r in rs for t in r["trainers"]
           if t["compute"] > 0]
    errors[n] = err
    rows[n] = dict(step=statistics.median(r["seconds"] for r in rs),
                   within=sum(e <= 0.2 for e in err) / len(err), mean_err=statistics.mean(err),
                   loss=rs[-1]["loss"], mix=mix(n))
base = rows["ring"]["step"]
print(f"| plan.cp_algorithm | step 0's groups | step (median, steps 1-{steps - 1}) | vs ring | "
      "predicted trainer time within 20% | mean prediction error |")
print("| --- | --- | --- | --- | --- | --- |")
with open(f"{out}/cp.csv", "w") as f:
    f.write("cp_algorithm,groups,step_seconds,speedup_vs_ring,within_20pct,mean_error,last_loss\n")
    for n in names:
        r = rows[n]
        print(f"| {n} | {r['mix']} | {r['step']:.2f} s | {base / r['step']:.2f}x | "
              f"{100 * r['within']:.0f}% | {100 * r['mean_err']:.0f}% |")
        f.write(f"{n},\"{r['mix']}\",{r['step']:.4f},{base / r['step']:.4f},{r['within']:.4f},"
                f"{r['mean_err']:.4f},{r['loss']:.6f}\n")
print(f"same batches in all (data hashes equal over {len(runs['ring'])} steps)")
fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6))
for n in names:
    a.plot([r["step"] for r in runs[n]], [r["seconds"] for r in runs[n]], "o-", label=n)
a.set_xlabel("step"); a.set_ylabel("seconds"); a.set_title(f"step time, {tokens} tokens/step"); a.legend()
b.boxplot([[100 * e for e in errors[n]] for n in names], labels=names)
b.axhline(20, ls="--", c="gray")
b.set_ylabel("|predicted - measured| / measured (%)"); b.set_title("per trainer and step")
fig.suptitle("4 trainers on this machine's cores, CP groups of 2-4")
fig.tight_layout(); fig.savefig(f"{out}/cp.png", dpi=120)
print(f"wrote {out}/cp.csv and {out}/cp.png")
PY
