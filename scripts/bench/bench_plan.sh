#!/usr/bin/env bash
# bench_plan.sh: the planner at cluster scale. For T = 64, 1024, 4096 and
# 12288 trainers, global batches of T x C tokens drawn from the real lengths
# of the Linux sources (every .c/.h of Linux 6.1, GPT-2 tokens), longer
# documents cut at min(T x C, 2M) tokens: planning latency of each planner on
# one core (median over STEPS batches), imbalance (max/mean trainer time),
# step / ideal and speedup over the static grid (LLaMA-7B cost model, the
# `meshloom simulate` defaults). Prints a markdown table; writes
# bench/results/plan_bench.csv, plan_bench.md, plan_bench.png and the full
# simulate report of each T.
#
#   scripts/bench/bench_plan.sh                 (after building: cmake --build build)
#   BUILD_DIR=build-plan C=32768 STEPS=9 scripts/bench/bench_plan.sh
#   LENGTHS=/path/to/linux_c_h.tsv scripts/bench/bench_plan.sh   (relative: from the repo root)
#
# LENGTHS (default bench/data/linux_c_h.tsv.xz; see bench/data/README.md) is
# a TSV, compressed or not, with a header and a gpt2_tokens
# column, one document per row, or a prepared dataset's .idx (meshloom
# prepare). Other lengths give other figures than
# bench/results (see docs/plan.md, "Benchmark").
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
MESHLOOM=${MESHLOOM:-$BUILD_DIR/app/meshloom}
LENGTHS=${LENGTHS:-bench/data/linux_c_h.tsv.xz}
C=${C:-16384}
STEPS=${STEPS:-5}
TRAINERS=${TRAINERS:-"64 1024 4096 12288"}
OUT=bench/results
PY=/usr/bin/python3

[ -x "$MESHLOOM" ] || { echo "bench_plan.sh: no $MESHLOOM; build first (cmake --build $BUILD_DIR)" >&2; exit 2; }
[ -r "$LENGTHS" ] || { echo "bench_plan.sh: cannot read $LENGTHS" >&2; exit 2; }
mkdir -p "$OUT"
CSV=$OUT/plan_bench.csv
rm -f "$CSV"
PIN=()
if command -v taskset > /dev/null; then PIN=(taskset -c 0); fi  # one core

for T in $TRAINERS; do
  BATCH=$((T * C))
  CONTEXT=$((BATCH < 2097152 ? BATCH : 2097152))
  echo "bench_plan.sh: T=$T, batch $BATCH tokens, context $CONTEXT, capacity $C, $STEPS steps" >&2
  "${PIN[@]}" "$MESHLOOM" simulate --lengths "$LENGTHS" --trainers "$T" --tp 1 --capacity "$C" \
    --batch "$BATCH" --context "$CONTEXT" --steps "$STEPS" --planners static,bytescale,hdp \
    --csv "$CSV" > "$OUT/simulate_T$T.txt"
done

"$PY" - "$CSV" > "$OUT/plan_bench.md" <<'PYEOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
by = {}
for r in rows:
    by.setdefault(int(r["trainers"]), {})[r["planner"]] = r
print("| trainers | sequences/step | planning ms: hdp (median / max) | bytescale | static "
      "| max/mean: hdp | bytescale | static | hdp step / ideal | ideal set by | hdp speedup vs static |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for t in sorted(by):
    g = by[t]
    h, b, s = g["hdp"], g["bytescale"], g["static"]
    bound = "longest ring" if int(h["ring_bound_steps"]) > 0 else "balance"
    def ms(r): return "%.1f" % float(r["planning_ms_median"]) if not r["error"] else "-"
    def imb(r): return "%.3f" % float(r["imbalance"]) if not r["error"] else "(cannot plan)"
    print("| %d | %.0f | %.1f / %.1f | %s | %s | %s | %s | %s | %.3f | %s | %s |" % (
        t, float(h["sequences"]), float(h["planning_ms_median"]), float(h["planning_ms_max"]),
        ms(b), ms(s), imb(h), imb(b), imb(s), float(h["step_over_ideal"]), bound,
        ("%.2fx" % float(h["speedup_vs_static"])) if not s["error"] else "-"))
PYEOF
cat "$OUT/plan_bench.md"
"$PY" scripts/plot/plot_plan.py bench "$CSV" -o "$OUT/plan_bench.png"
echo "bench_plan.sh: wrote $CSV, $OUT/plan_bench.md, $OUT/plan_bench.png" >&2
