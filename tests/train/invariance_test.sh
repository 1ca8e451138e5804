#!/usr/bin/env bash
# Parallelism invariance, end to end: the same global batch gives the same loss
# and gradients (relative error <= 1e-5, fp32) on 1, 2, 3 and 4 trainers, with
# HDP and static plans, CP degrees 1 to 4 (sequences cut over ranks and run
# with ring attention), with ZeRO-1, and with tensor parallelism (parallel.tp 2
# and 4: TP groups as HDP ranks, rings across groups; the dumps are unsharded),
# with and without sequence parallelism, and with pipeline parallelism
# (parallel.pp 2 and 3, layers split evenly and not, with tp 2, rings of
# stages across pipelines, tied and untied embeddings, PP-Balance with
# pipelines running different numbers of micro-batches), and with Ulysses,
# hybrid (Ulysses x ring) and cost-chosen CP attention per group
# (plan.cp_algorithm; groups of 2 to 4, tp 1 and 2, pp 2).
# Reference: one trainer, nothing split.
#   invariance_test.sh MESHLOOM MPIEXEC
# With a third argument `cuda`, the cases train on the GPU (run.backend: cuda;
# trainers share the node's GPUs; rings on the GPU) and must give the CPU
# reference's dump: fp32 to 1e-4 (other summation orders), bf16 to 5e-2;
# also with selective offloading (plan.offload).
# Skipped (exit 77) where no GPU is visible. The shim_* cases preload the
# test-only NCCL over MPI named by NCCL_SHIM (ctest sets it).
# The data, config, reference and cases: invariance_cases.sh (shared with the
# GPU bundle, scripts/gpu/gpu_bundle.sh).
set -u
meshloom=$1 mpiexec=$2 backend=${3:-cpu} nccl_shim=${NCCL_SHIM:-}
if [[ $backend == cuda ]] && ! nvidia-smi -L >/dev/null 2>&1; then
  echo "skipped: no GPU visible (nvidia-smi lists none)"
  exit 77
fi
# shellcheck source=tests/common/testlib.sh
source "$(dirname "$0")/../common/testlib.sh"
# shellcheck source=tests/train/invariance_cases.sh
source "$(dirname "$0")/invariance_cases.sh"
prepare_docs docs "$invariance_docs"
invariance_config "$backend" >"$dir/c.yaml"
run() {  # name trainers extra-args...
  invariance_run "$@" || { cat "$dir/$1.txt"; fail "$1 exited non-zero"; }
}
compare() {  # name tolerance what train-args...
  invariance_compare /usr/bin/python3 "$root/scripts/data/compare_dumps.py" "$1" "$2" "${@:4}" ||
    fail "$1: $3 differs from the one-trainer CPU reference"
}
run ref "${invariance_ref[@]}"
if [[ $backend == cpu ]]; then
  for case in "${invariance_cpu_cases[@]}"; do
    invariance_case "$case"
    run "$case_name" "$case_trainers" "${case_args[@]}"
    compare "$case_name" "$case_tol" "trainers=$case_trainers ${case_args[*]}" "${case_args[@]}"
    # The CP attention the case asks for must be what ran (the lead's log).
    for algo in ulysses hybrid; do
      [[ $case_name == *"${algo:0:3}"* ]] || continue
      grep -q "CP attention of the split sequences .*: .*$algo" "$dir/$case_name.txt" ||
        { cat "$dir/$case_name.txt"; fail "$case_name: no $algo group ran"; }
    done
    if [[ $case_name == ppbal* && ${case_args[*]} == *parallel.pp=* ]]; then
      read -r lo hi < <(grep -oE "micro-batches per pipeline: [0-9]+ to [0-9]+" "$dir/$case_name.txt" |
        awk '{print $4, $6}')
      [[ -n ${lo:-} && $lo != "$hi" ]] ||
        { cat "$dir/$case_name.txt"; fail "$case_name: the pipelines ran equal micro-batch counts"; }
      grep -q "(pp-balance's plan)" "$dir/$case_name.txt" ||
        { cat "$dir/$case_name.txt"; fail "$case_name: no step ran PP-Balance's own plan"; }
      echo "ok: $case_name: pipelines ran $lo to $hi micro-batches"
    fi
  done
else
  for case in "${invariance_gpu_cases[@]}"; do
    invariance_case "$case"
    run "$case_name" "$case_trainers" --set run.backend=cuda "${case_args[@]}"
    invariance_on_gpu "$case_name" || { cat "$dir/$case_name.txt"; fail "$case_name: not on the GPU"; }
    [[ $case_name != shim_* ]] || invariance_over_nccl "$case_name" ||
      { cat "$dir/$case_name.txt"; fail "$case_name: gradients not over (shimmed) NCCL"; }
    compare "$case_name" "$case_tol" "GPU, trainers=$case_trainers ${case_args[*]}" "${case_args[@]}"
  done
fi
echo "invariance test passed ($backend)"
