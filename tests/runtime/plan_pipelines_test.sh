#!/usr/bin/env bash
# `meshloom plan --config` with parallel.pp > 1 predicts each step as the
# runtime does (metrics.jsonl's `predicted`): the slowest pipeline's 1F1B
# makespan, set against the other plan.balance on the same batch. Planned
# both ways, the two runs must agree: each one's prediction is the other's
# comparison. No MPI.
#   plan_pipelines_test.sh MESHLOOM
set -u
meshloom=$1
source "$(dirname "$0")/../common/testlib.sh"
prepare_docs docs 'a*'
cat >"$dir/c.yaml" <<YAML
run: {dir: $dir/run}
model: {vocab_size: 257, d_model: 64, n_layers: 4, n_heads: 2, n_kv_heads: 1, ffn_dim: 160}
parallel: {pp: 2}
data: {seq_len: 512, tokens_per_step: 8000, sources: [{name: docs, path: $dir/docs}]}
plan: {capacity: 512}
YAML
plan() { "$meshloom" plan --config "$dir/c.yaml" --trainers 6 --steps 3 "$@" 2>&1; }
# step -> "predicted other" (value and unit each)
times() { awk '$1 ~ /^[0-9]+$/ && $5 ~ /^[0-9]+-[0-9]+$/ { print $1, $6 $7, $12 $13 }' <<<"$1"; }

dp=$(plan) || fail "plan failed: $dp"
grep -q "predicted: the slowest pipeline's 1F1B makespan, rings waiting for their members; against plan.balance: pp" <<<"$dp" ||
  fail "no 1F1B line against PP-Balance: $dp"
grep -q 'balance pp' <<<"$dp" || fail "no 'balance pp' column: $dp"
pp=$(plan --set plan.balance=pp) || fail "plan with plan.balance: pp failed: $pp"
grep -q 'against plan.balance: dp' <<<"$pp" || fail "plan.balance: pp not set against dp: $pp"
a=$(times "$dp") b=$(times "$pp")
[[ $(wc -l <<<"$a") == 3 ]] || fail "not 3 steps: $dp"
while read -r step mine other; do
  read -r step2 mine2 other2 <<<"$(grep "^$step " <<<"$b")"
  [[ $mine == "$other2" && $other == "$mine2" ]] ||
    fail "step $step: dp predicts $mine against pp's $other, pp predicts $mine2 against dp's $other2"
done <<<"$a"
# Without pipelines, the column is the static grid's serial makespan.
one=$(plan --set parallel.pp=1) || fail "plan at pp 1 failed: $one"
grep -q '1F1B' <<<"$one" && fail "a 1F1B line without pipelines: $one"
grep -qE 'predicted .* static' <<<"$one" || fail "no static column at pp 1: $one"
echo "ok"
