#!/usr/bin/env bash
# `meshloom simulate --pp` as a user runs it: HDP ranks become pipelines and
# the static 3D mesh, HDP with DP-Balance and HDP with PP-Balance plan the
# same batches (lib/plan/simulate/simulate_pipeline.hpp); the PP degree and the
# capacity it buys are printed, --csv appends one line per setup, and a PP
# degree that does not fit exits 2 with one error line. No MPI, a few seconds.
#   simulate_pp_test.sh MESHLOOM
set -u
meshloom=$1
source "$(dirname "$0")/../common/testlib.sh"

sim() {
  "$meshloom" simulate --model llama-7b --gpus 64 --tp 2 --capacity 8K --batch 1M --steps 2 "$@" 2>&1
}
out=$(sim --pp 2 --context 64K --lengths github --csv "$dir/pp.csv") || fail "simulate --pp 2: $out"
grep -q '^64 GPUs = 16 pipelines (HDP ranks) x 2 stages x TP 2; layers per stage 16/16' <<<"$out" ||
  fail "simulate --pp 2: no layout line in: $out"
grep -q '^| 2 (used) | 16 | 16/16 | 8K | CP 8 x DP 2 | yes |$' <<<"$out" ||
  fail "simulate --pp 2: no fit row in: $out"
for setup in 'static (CP 8 x DP 2)' 'dp-balance' 'pp-balance (short ones on'; do
  grep -qE "^\| ${setup//(/\\(}.* \| [0-9.]+x \| [0-9.]+% \| [0-9.]+% \| [0-9]+-[0-9]+ \|$" <<<"$out" ||
    fail "simulate --pp 2: no '$setup' row in: $out"
done
(($(wc -l <"$dir/pp.csv") == 4)) || fail "--csv: not a header and 3 rows: $(cat "$dir/pp.csv")"
grep -q '^llama-7b,64,2,2,16,8192,65536,1048576,github,' "$dir/pp.csv" ||
  fail "--csv: unexpected rows: $(cat "$dir/pp.csv")"

out=$(sim --pp auto --context 64K --lengths byted) || fail "simulate --pp auto: $out"
grep -q '^pp 1: the smallest PP degree that fits' <<<"$out" || fail "--pp auto: $out"

expect_error "must be a positive multiple of tp x pp (2 x 3)" sim --pp 3 --context 64K
expect_error "--pp 'two': give a number of stages >= 1, or auto" sim --pp two --context 64K
expect_error "--pp 2 does not fit: a 2M sequence needs 256 pipelines" sim --pp 2 --context 2M
echo "ok"
