#!/usr/bin/env bash
# The CUDA backend end to end: the same global batch gives the CPU's loss and
# gradients when trained on the GPU, on 1 to 4 trainers (sharing the node's
# GPUs), with CP rings on the GPU (HDP and static plans). Reference: the CPU
# backend, one trainer, nothing split. fp32 to 1e-4 (GPU and CPU sum in other
# orders), bf16 to 5e-2. Skipped (exit 77) where no GPU is visible.
#   invariance_cuda_test.sh MESHLOOM MPIEXEC
set -u
meshloom=$1 mpiexec=$2
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "skipped: no GPU visible (nvidia-smi lists none)"
  exit 77
fi
source "$(dirname "$0")/../common/testlib.sh"
prepare_docs docs 'a*'
# head_dim 64: what the GPU attention kernels support.
cat >"$dir/c.yaml" <<YAML
run: {timeout: 120, steps: 1, dir: $dir/run}
cluster: {roles: {constructors: 1, loaders: 1}}
model: {vocab_size: 257, d_model: 128, n_layers: 2, n_heads: 2, n_kv_heads: 1, ffn_dim: 160}
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
run ref 1 --set plan.capacity=4096
for case in "gpu1 1 hdp 4096 fp32 1e-4" "gpu2 2 hdp 512 fp32 1e-4" "gpu3 3 hdp 400 fp32 1e-4" \
            "static4 4 static 256 fp32 1e-4" "bf16_2 2 hdp 512 bf16 5e-2"; do
  read -r name t planner cap precision tol <<<"$case"
  run "$name" "$t" --set run.backend=cuda --set run.precision="$precision" \
    --set plan.planner="$planner" --set plan.capacity="$cap"
  grep -q "computes on GPU" "$dir/$name.txt" || { cat "$dir/$name.txt"; fail "$name: not on the GPU"; }
  /usr/bin/python3 "$root/scripts/compare_dumps.py" "$dir/ref.h5" "$dir/$name.h5" "$tol" ||
    fail "$name: trainers=$t planner=$planner capacity=$cap $precision differs from the CPU"
done
echo "CUDA invariance test passed"
