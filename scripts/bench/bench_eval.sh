#!/usr/bin/env bash
# bench_eval.sh: what evaluation while training costs (eval.every), on the
# quickstart (configs/quickstart.yaml: 8 ranks, 5 trainers, real text, a
# held-out 2%), STEPS steps with an evaluation of one step's tokens after
# every EVERY-th step and the last, against the same run without
# evaluations (the same batches: their data hashes are compared), REPS
# times each, alternating.
#   overhead (in run)  the evaluations' seconds (each the slowest trainer's)
#                      over the steps' (the slowest trainer's, data wait in),
#                      from the evaluating runs' metrics.jsonl
#   overhead (wall)    the evaluating runs' wall time over the plain runs'
#                      (best of REPS each; start-up included, so noisier)
#   FLOP share         the evaluations' forward FLOPs over the steps' FLOPs
#                      (forward and backward): what the evaluation must cost
#   target             FLOP share + 10 percentage points (issue #37)
# Prints the table, writes bench/results/eval_overhead.csv and .png.
#   scripts/bench/bench_eval.sh   (STEPS=40 EVERY=10 REPS=2 by default)
set -euo pipefail
# shellcheck source=scripts/bench/train_common.sh
source "$(dirname "$0")/train_common.sh"
STEPS=${STEPS:-40} EVERY=${EVERY:-10} REPS=${REPS:-2}
python=/usr/bin/python3
run() {  # NAME EVERY: one training run into $work/NAME, its wall seconds in $work/NAME.wall
  local name=$1 every=$2 t0 t1
  echo "[bench_eval] $name (eval.every $every)" >&2
  t0=$(date +%s.%N)
  mpirun --oversubscribe --bind-to none -np 8 "$MESHLOOM" train -c configs/quickstart.yaml \
    --set run.dir="$work/$name" --set run.steps="$STEPS" --set eval.every="$every" \
    --set eval.tokens=0 >"$work/$name.log" 2>&1 || { cat "$work/$name.log"; exit 1; }
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc >"$work/$name.wall"
}
for r in $(seq 1 "$REPS"); do
  run "plain$r" 0
  run "eval$r" "$EVERY"
done
mkdir -p "$out"
"$python" - "$work" "$REPS" "$out" "$(git rev-parse --short HEAD)" <<'PY'
import csv, json, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
work, reps, out, commit = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def rows(name):
    return [r for r in map(json.loads, open(f"{work}/{name}/metrics.jsonl")) if "step" in r]
def wall(name):
    return float(open(f"{work}/{name}.wall").read())
plain, ev = rows("plain1"), rows("eval1")
assert [r["data_hash"] for r in plain] == [r["data_hash"] for r in ev], "other batches"
table = []
for r in range(1, reps + 1):
    e = rows(f"eval{r}")
    step_s = sum(x["seconds"] for x in e)
    evals = [x["eval"] for x in e if "eval" in x]
    eval_s = sum(x["seconds"] for x in evals)
    train_flops = sum(t["flops"] for x in e for t in x["trainers"])
    share = sum(x["flops"] for x in evals) / train_flops
    table.append({"rep": r, "steps": len(e), "evaluations": len(evals),
                  "eval_tokens": evals[0]["tokens"], "step_seconds": step_s,
                  "eval_seconds": eval_s, "overhead_in_run": eval_s / step_s,
                  "flop_share": share, "target": share + 0.10})
best_plain = min(wall(f"plain{r}") for r in range(1, reps + 1))
best_eval = min(wall(f"eval{r}") for r in range(1, reps + 1))
for t in table:
    t["overhead_wall"] = best_eval / best_plain - 1
    t["commit"] = commit
print(f"{'rep':>3} {'steps':>5} {'evals':>5} {'eval tok':>8} {'steps s':>8} {'evals s':>8} "
      f"{'overhead':>9} {'wall':>7} {'FLOP share':>10} {'target':>7}")
for t in table:
    print(f"{t['rep']:>3} {t['steps']:>5} {t['evaluations']:>5} {t['eval_tokens']:>8} "
          f"{t['step_seconds']:>8.2f} {t['eval_seconds']:>8.3f} {t['overhead_in_run']:>9.1%} "
          f"{t['overhead_wall']:>7.1%} {t['flop_share']:>10.1%} {t['target']:>7.1%}")
with open(f"{out}/eval_overhead.csv", "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(table[0]))
    w.writeheader()
    w.writerows(table)
fig, ax = plt.subplots(figsize=(6, 3.5))
labels = ["overhead (in run)", "overhead (wall)", "FLOP share", "target"]
vals = [min(t["overhead_in_run"] for t in table), table[0]["overhead_wall"],
        table[0]["flop_share"], table[0]["target"]]
ax.bar(labels, [100 * v for v in vals], color=["C0", "C1", "C7", "C3"])
ax.set(ylabel="% of training time", title=f"evaluation every {table[0]['steps'] // table[0]['evaluations']}"
       f" steps, quickstart ({commit})")
fig.tight_layout()
fig.savefig(f"{out}/eval_overhead.png", dpi=110)
print(f"wrote {out}/eval_overhead.csv and .png")
PY
