#!/usr/bin/env bash
# `meshloom plan --config` with run.backend: cuda prints the device memory one
# trainer needs (lib/plan/device_memory.hpp), with the transport rings would
# use; nothing for the CPU backend. No MPI, no GPU.
#   run_plan_memory.sh MESHLOOM
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
out=$(plan --set run.backend=cpu) || fail "plan failed: $out"
grep -q 'device memory' <<<"$out" && fail "an estimate for the CPU backend: $out"
echo "ok"
