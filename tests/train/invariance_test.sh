#!/usr/bin/env bash
# Parallelism invariance, end to end: the same global batch gives the same loss
# and gradients (relative error <= 1e-5, fp32) on 1, 2, 3 and 4 trainers, with
# HDP and static plans, CP degrees 1 to 4 (sequences cut over ranks and run
# with ring attention), and with ZeRO-1. Reference: one trainer, nothing split.
#   invariance_test.sh MESHLOOM MPIEXEC
set -u
meshloom=$1 mpiexec=$2
source "$(dirname "$0")/../common/testlib.sh"
prepare_docs docs 'a*'
cat >"$dir/c.yaml" <<YAML
run: {timeout: 60, steps: 1, dir: $dir/run}
cluster: {roles: {constructors: 1, loaders: 1}}
model: {vocab_size: 257, d_model: 32, n_layers: 2, n_heads: 4, n_kv_heads: 2, ffn_dim: 64}
data:
  seq_len: 1024
  tokens_per_step: 3000
  sources: [{name: docs, path: $dir/docs}]
log: {metrics: false}
YAML
run() {  # name trainers extra-args...
  local name=$1 t=$2; shift 2
  timeout 120 "$mpiexec" --oversubscribe --bind-to none -np $((2 + t)) "$meshloom" train \
    -c "$dir/c.yaml" --dump-step 0 "$dir/$name.h5" "$@" >"$dir/$name.txt" 2>&1 ||
    { cat "$dir/$name.txt"; fail "$name exited non-zero"; }
}
run ref 1 --set plan.capacity=4096
for case in "hdp2 2 hdp 512" "hdp3 3 hdp 400" "hdp4 4 hdp 300" "static4 4 static 256" \
            "static2 2 static 512" "bytescale3 3 bytescale 400"; do
  read -r name t planner cap <<<"$case"
  run "$name" "$t" --set plan.planner="$planner" --set plan.capacity="$cap"
  /usr/bin/python3 "$root/scripts/compare_dumps.py" "$dir/ref.h5" "$dir/$name.h5" 1e-5 ||
    fail "$name: trainers=$t planner=$planner capacity=$cap differs from one trainer"
done
run zero3 3 --set plan.capacity=400 --set optim.zero1=true
/usr/bin/python3 "$root/scripts/compare_dumps.py" "$dir/ref.h5" "$dir/zero3.h5" 1e-5 || fail "zero1"
echo "invariance test passed"
