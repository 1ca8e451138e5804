#!/usr/bin/env bash
# `meshloom simulate --checkpoint-fs` as a user runs it: the checkpoint model
# (plan/cost/checkpoint_cost.hpp) of ByteScale's LLaMA-70B on 1,024 and 8,192
# GPUs prints both methods, and writing in every trainer is faster than the
# gather on trainer 0 and grows no slower with the GPUs; a layout that does
# not fit the GPUs exits 2 with one error line. No MPI, a second.
#   simulate_checkpoint_test.sh MESHLOOM
set -u
meshloom=$1
source "$(dirname "$0")/../common/testlib.sh"

seconds() {  # the save column of a method's row, in seconds
  awk -F'|' -v m=" $2 " '$2 == m {
    t = $6; gsub(/ /, "", t); s = 0
    if (t ~ /h/) { split(t, a, "h"); s += a[1] * 3600; t = a[2] }
    if (t ~ /m[0-9]/) { split(t, a, "m"); s += a[1] * 60; t = a[2] }
    if (t ~ /ms$/) { sub(/ms$/, "", t); s += t / 1000 } else { sub(/s$/, "", t); s += t }
    print s }' <<<"$1"
}
for gpus in 1024 8192; do
  out=$("$meshloom" simulate --model llama-70b --gpus $gpus --tp 8 --pp 2 --checkpoint-fs 100 2>&1) ||
    fail "simulate --checkpoint-fs on $gpus GPUs: $out"
  grep -q "^| gathered | 1 |" <<<"$out" || fail "no gathered row: $out"
  grep -q "^| collective | $(sed ':a;s/\B[0-9]\{3\}\>/,&/;ta' <<<$gpus) |" <<<"$out" || fail "no collective row: $out"
  g=$(seconds "$out" gathered) c=$(seconds "$out" collective)
  awk -v g="$g" -v c="$c" 'BEGIN { exit !(c > 0 && c * 10 < g) }' ||
    fail "$gpus GPUs: collective $c s is not 10x faster than gathered $g s: $out"
  echo "ok: llama-70b on $gpus GPUs: save $c s collective, $g s gathered"
done
expect_error "do not hold whole TP x PP groups" \
  "$meshloom" simulate --model llama-70b --gpus 1000 --tp 8 --pp 2 --checkpoint-fs 100
echo "ok: a layout that does not fit the GPUs is refused"
