#!/usr/bin/env bash
# Parallelism invariance, end to end: the same global batch gives the same loss
# and gradients (relative error <= 1e-5, fp32) on 1, 2, 3 and 4 trainers, with
# HDP and static plans, CP degrees 1 to 4 (sequences cut over ranks and run
# with ring attention), and with ZeRO-1. Reference: one trainer, nothing split.
#   invariance_test.sh MESHLOOM MPIEXEC
# With a third argument `cuda`, the cases train on the GPU (run.backend: cuda;
# trainers share the node's GPUs; rings on the GPU) and must give the CPU
# reference's dump: fp32 to 1e-4 (other summation orders), bf16 to 5e-2;
# also with selective offloading (plan.offload).
# Skipped (exit 77) where no GPU is visible.
set -u
meshloom=$1 mpiexec=$2 backend=${3:-cpu}
if [[ $backend == cuda ]] && ! nvidia-smi -L >/dev/null 2>&1; then
  echo "skipped: no GPU visible (nvidia-smi lists none)"
  exit 77
fi
source "$(dirname "$0")/../common/testlib.sh"
prepare_docs docs 'a*'
model="{vocab_size: 257, d_model: 32, n_layers: 2, n_heads: 4, n_kv_heads: 2, ffn_dim: 64}"
# The GPU attention kernels take head_dim 64 or 128.
[[ $backend == cuda ]] && model="{vocab_size: 257, d_model: 128, n_layers: 2, n_heads: 2, n_kv_heads: 1, ffn_dim: 160}"
cat >"$dir/c.yaml" <<YAML
run: {timeout: 120, steps: 1, dir: $dir/run}
cluster: {roles: {constructors: 1, loaders: 1}}
model: $model
data:
  seq_len: 1024
  tokens_per_step: 3000
  sources: [{name: docs, path: $dir/docs}]
log: {metrics: false}
YAML
run() {  # name trainers extra-args...
  local name=$1 t=$2; shift 2
  timeout 300 "$mpiexec" --oversubscribe --bind-to none -np $((2 + t)) "$meshloom" train \
    -c "$dir/c.yaml" --dump-step 0 "$dir/$name.h5" "$@" >"$dir/$name.txt" 2>&1 ||
    { cat "$dir/$name.txt"; fail "$name exited non-zero"; }
}
compare() {  # name tolerance what
  /usr/bin/python3 "$root/scripts/compare_dumps.py" "$dir/ref.h5" "$dir/$1.h5" "$2" ||
    fail "$1: $3 differs from the one-trainer CPU reference"
}
run ref 1 --set plan.capacity=4096
if [[ $backend == cpu ]]; then
  for case in "hdp2 2 hdp 512" "hdp3 3 hdp 400" "hdp4 4 hdp 300" "static4 4 static 256" \
              "static2 2 static 512" "bytescale3 3 bytescale 400"; do
    read -r name t planner cap <<<"$case"
    run "$name" "$t" --set plan.planner="$planner" --set plan.capacity="$cap"
    compare "$name" 1e-5 "trainers=$t planner=$planner capacity=$cap"
  done
  run zero3 3 --set plan.capacity=400 --set optim.zero1=true
  compare zero3 1e-5 "zero1"
else
  for case in "gpu1 1 hdp 4096 fp32 1e-4" "gpu2 2 hdp 512 fp32 1e-4" "gpu3 3 hdp 400 fp32 1e-4" \
              "static4 4 static 256 fp32 1e-4" "bf16_2 2 hdp 512 bf16 5e-2"; do
    read -r name t planner cap precision tol <<<"$case"
    run "$name" "$t" --set run.backend=cuda --set run.precision="$precision" \
      --set plan.planner="$planner" --set plan.capacity="$cap"
    grep -q "computes on GPU" "$dir/$name.txt" || { cat "$dir/$name.txt"; fail "$name: not on the GPU"; }
    compare "$name" "$tol" "GPU, trainers=$t planner=$planner capacity=$cap $precision"
  done
  # Selective offloading: long pieces keep activations in host memory.
  run offload2 2 --set run.backend=cuda --set run.precision=fp32 --set plan.capacity=400 \
    --set plan.offload=true
  compare offload2 1e-4 "GPU with plan.offload"
fi
echo "invariance test passed ($backend)"
