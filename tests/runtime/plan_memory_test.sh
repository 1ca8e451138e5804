#!/usr/bin/env bash
# `meshloom plan --config` with run.backend: cuda prints the device memory one
# trainer needs (lib/plan/cost/device_memory.hpp), with the transport rings would
# use; with run.backend: cpu the host memory (lib/plan/cost/host_memory.hpp), per
# TP rank with parallel.tp, and the plan is over trainers / tp HDP ranks.
# No MPI, no GPU.
#   plan_memory_test.sh MESHLOOM
set -u
meshloom=$1
source "$(dirname "$0")/../common/testlib.sh"
prepare_docs docs 'a*'
cat >"$dir/c.yaml" <<YAML
run: {backend: cuda, dir: $dir/run}
model: {vocab_size: 257, d_model: 128, n_layers: 4, n_heads: 2, n_kv_heads: 1, ffn_dim: 160}
data: {seq_len: 1024, tokens_per_step: 3000, sources: [{name: docs, path: $dir/docs}]}
plan: {capacity: 512}
YAML
plan() { "$meshloom" plan --config "$dir/c.yaml" --trainers 2 --steps 1 "$@" 2>&1; }

out=$(plan) || fail "plan failed: $out"
want='device memory per trainer \(run.backend: cuda, rings over NCCL\): about [0-9.]+ [KMG]iB \(.*\) for micro-batches of up to 512 tokens$'
grep -qE "$want" <<<"$out" || fail "no estimate line like '$want' in: $out"
out=$(plan --set run.gpu_comm=mpi) || fail "plan failed: $out"
grep -q 'rings over MPI' <<<"$out" || fail "run.gpu_comm: mpi not followed: $out"
# The CPU backend, on a model whose KV heads split 2 ways.
cpu=(--set run.backend=cpu --set model.n_kv_heads=2)
out=$(plan "${cpu[@]}") || fail "plan failed: $out"
grep -q 'device memory' <<<"$out" && fail "a device estimate for the CPU backend: $out"
host='host memory per trainer \(run.backend: cpu, tp 1\): about ([0-9.]+) MiB \(.*\) for micro-batches of up to 512 tokens'
[[ $out =~ $host ]] || fail "no host estimate line like '$host' in: $out"
one=${BASH_REMATCH[1]}
out=$("$meshloom" plan --config "$dir/c.yaml" --trainers 4 --steps 1 "${cpu[@]}" --set parallel.tp=2 2>&1) ||
  fail "plan at tp 2 failed: $out"
grep -q 'planning over 2 HDP ranks' <<<"$out" || fail "tp 2 on 4 trainers is not 2 HDP ranks: $out"
[[ $out =~ ${host/tp 1/tp 2} ]] || fail "no tp 2 host estimate in: $out"
two=${BASH_REMATCH[1]}
awk -v a="$one" -v b="$two" 'BEGIN { exit !(b < 0.8 * a) }' ||
  fail "a TP rank's estimate ($two MiB) is not well below the whole model's ($one MiB)"
# Sequence parallelism keeps 1/tp of the residual stream's rows.
out=$("$meshloom" plan --config "$dir/c.yaml" --trainers 4 --steps 1 "${cpu[@]}" --set parallel.tp=2 \
  --set parallel.sequence_parallel=true 2>&1) || fail "plan with sequence parallelism failed: $out"
[[ $out =~ ${host/tp 1/tp 2, sequence parallel} ]] || fail "no sequence-parallel estimate in: $out"
awk -v a="$two" -v b="${BASH_REMATCH[1]}" 'BEGIN { exit !(b < a) }' ||
  fail "sequence parallelism (${BASH_REMATCH[1]} MiB) saves nothing over tp 2 ($two MiB)"
out=$("$meshloom" plan --config "$dir/c.yaml" --trainers 3 --steps 1 "${cpu[@]}" --set parallel.tp=2 2>&1) &&
  fail "3 trainers at tp 2 planned: $out"
grep -q 'not a multiple of parallel.tp' <<<"$out" || fail "no clear message for 3 trainers at tp 2: $out"
echo "ok"
