#!/usr/bin/env bash
# `meshloom simulate --png` as a user runs it: step 0's plans (hdp, or the
# other planner named, beside the static grid) are written as JSON beside the
# chart and drawn, and they are the plans the report's step times came from.
# Without static and another planner, or with --pp, it exits 2 with one
# error line. No MPI, a few seconds.
#   simulate_png_test.sh MESHLOOM
set -u
meshloom=$1
source "$(dirname "$0")/../common/testlib.sh"

sim() {
  "$meshloom" simulate --model llama-7b --trainers 16 --capacity 4K --context 32K --batch 256K \
    --lengths github --steps 1 "$@" 2>&1
}
out=$(sim --png "$dir/s.png" --csv "$dir/s.csv") || fail "simulate --png: $out"
[[ -s $dir/s.png ]] || fail "simulate --png: no chart: $out"
grep -qF "chart: $dir/s.png" <<<"$out" || fail "simulate --png: no chart line in: $out"
# Both plans are of one batch of 16 trainers, and each makespan is the step
# time --csv reports for its planner (one step: no mean to blur it).
/usr/bin/python3 - "$dir/s.hdp.json" "$dir/s.static.json" "$dir/s.csv" <<'PY' || fail "simulate --png: plans are not the simulated step 0"
import csv, json, sys
hdp, grid = (json.load(open(p)) for p in sys.argv[1:3])
step = {r["planner"]: float(r["step_s"]) for r in csv.DictReader(open(sys.argv[3]))}
assert (hdp["planner"], grid["planner"]) == ("hdp", "static"), (hdp["planner"], grid["planner"])
assert hdp["trainers"] == grid["trainers"] == 16
assert sorted(s["length"] for s in hdp["sequences"]) == sorted(s["length"] for s in grid["sequences"])
for plan in (hdp, grid):
    assert abs(plan["makespan_s"] - step[plan["planner"]]) <= 1e-5 * step[plan["planner"]], (plan["makespan_s"], step)
PY

# Without hdp, the first other planner named is drawn.
out=$(sim --planners static,bytescale --png "$dir/b.png") || fail "simulate --png (bytescale): $out"
[[ -s $dir/b.bytescale.json && -s $dir/b.png ]] || fail "simulate --png: bytescale not drawn: $out"

expect_error "--planners must name static and another" sim --planners hdp,bytescale --png "$dir/x.png"
expect_error "not --pp" sim --pp 2 --png "$dir/x.png"
[[ -e $dir/x.png ]] && fail "a refused --png wrote a chart"
echo "ok"
