#!/usr/bin/env bash
# `meshloom plan --trainers-per-node N`: trainers sit on nodes of N, in
# blocks, and the per-ring table says how many nodes each ring spans and how
# many node boundaries it crosses; a ring that fits in a node crosses none.
# With --config the layout is named as the run's log names it, and the first
# step's rings follow the step table. No MPI.
#   plan_nodes_test.sh MESHLOOM
set -u
meshloom=$1
source "$(dirname "$0")/../common/testlib.sh"
{
  echo 16000
  for _ in $(seq 12); do echo 4000; done
} >"$dir/ring.txt"
plan() { "$meshloom" plan --lengths "$dir/ring.txt" --trainers 8 --capacity 4K "$@" 2>&1; }

# A 4-way ring on nodes of 4: inside one node, 0 boundaries crossed.
out=$(plan --trainers-per-node 4) || fail "plan --trainers-per-node 4: $out"
grep -q '^8 trainers, 4 a node: 2 nodes$' <<<"$out" || fail "no layout line in: $out"
grep -qE '^ +seq +tokens +k +attention +trainers +nodes +crosses +start +time$' <<<"$out" ||
  fail "no ring table header in: $out"
grep -qE '^ +0 +16000 +4 ring +[0-9,-]+ +1 +0 ' <<<"$out" ||
  fail "the 4-way ring is not inside one node: $out"
grep -q '1 rings: 1 inside one node, 0 across nodes; node boundaries crossed: 0' <<<"$out" ||
  fail "no ring count in: $out"
grep -q 'plan valid' <<<"$out" || fail "plan not valid: $out"
# On nodes of 3 it cannot fit: 2 nodes, 1 boundary.
out=$(plan --trainers-per-node 3) || fail "plan --trainers-per-node 3: $out"
grep -qE '^ +0 +16000 +4 ring +[0-9,-]+ +2 +1 ' <<<"$out" || fail "the ring does not cross: $out"
expect_fail() {
  out=$("$meshloom" "$@" 2>&1) && fail "meshloom $* succeeded: $out"
  true
}
expect_fail plan --lengths "$dir/ring.txt" --trainers 8 --trainers-per-node 0

# --config: 4 trainers on nodes of 2, sequences of up to 1024 tokens in
# micro-batches of 512, so some are split.
prepare_docs docs 'a*'
cat >"$dir/c.yaml" <<YAML
run: {dir: $dir/run}
model: {vocab_size: 257, d_model: 64, n_layers: 2, n_heads: 2, n_kv_heads: 2, ffn_dim: 96}
data: {seq_len: 1024, tokens_per_step: 3000, sources: [{name: docs, path: $dir/docs}]}
plan: {capacity: 512, intra_bandwidth: 2e10}
YAML
out=$("$meshloom" plan --config "$dir/c.yaml" --trainers 4 --steps 2 --trainers-per-node 2 2>&1) ||
  fail "plan --config --trainers-per-node 2: $out"
grep -q '^trainers on 2 nodes: node0 2, node1 2$' <<<"$out" || fail "no node layout in: $out"
grep -q '^rings of step 0:$' <<<"$out" || fail "no rings of step 0 in: $out"
count='rings: [0-9]+ inside one node, [0-9]+ across nodes; node boundaries crossed: [0-9]+$'
grep -qE "$count" <<<"$out" || fail "no ring count in: $out"
echo "ok"
