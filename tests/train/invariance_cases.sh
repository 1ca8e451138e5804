# shellcheck shell=bash disable=SC2034,SC2154  # variables for and from the sourcing script
# invariance_cases.sh: the one definition of the end-to-end invariance check's
# data, config, reference and cases (source it). Read by
# tests/train/invariance_test.sh, and by the GPU bundle: scripts/gpu/gpu_bundle.sh
# copies this file into build-bundle/, whose run.sh `train` runs the GPU cases
# on a GPU machine, and scripts/gpu/gpu_bundle_check.sh compares what comes back
# with a CPU reference made here (with the copy that came back).
#
# The functions read three variables of the caller: meshloom (the executable),
# mpiexec (mpirun) and dir (the work folder: data in $dir/docs, the config in
# $dir/c.yaml, each run's dump and log in $dir/NAME.h5 and $dir/NAME.txt).

# The Python library docs that prepare_docs (tests/common/testlib.sh) turns into
# the dataset $dir/docs, byte tokenizer.
invariance_docs='a*'

# The reference: one trainer, nothing split, on the CPU.
invariance_ref=(1 --set plan.capacity=4096)

# One case a line: NAME TRAINERS TOLERANCE meshloom-train-arguments...
# Each run dumps its last step (--dump-step $dir/NAME.h5: step 0 unless the
# arguments set run.steps) and compare_dumps.py checks its loss and gradients
# against the reference's, run for as many steps, to a relative error
# TOLERANCE; the parameters (before the step's update) must be equal, or,
# with TOLERANCE written GRADS:PARAMS, agree to PARAMS. A case named ppbal*
# with parallel.pp must also run different numbers of micro-batches on its
# pipelines (the step log's min and max differ); one named *uly* or *hyb*
# must run Ulysses or hybrid attention on some group.
invariance_cpu_cases=(
  "hdp2       2 1e-5 --set plan.planner=hdp --set plan.capacity=512"
  "hdp3       3 1e-5 --set plan.planner=hdp --set plan.capacity=400"
  "hdp4       4 1e-5 --set plan.planner=hdp --set plan.capacity=300"
  "static4    4 1e-5 --set plan.planner=static --set plan.capacity=256"
  "static2    2 1e-5 --set plan.planner=static --set plan.capacity=512"
  "bytescale3 3 1e-5 --set plan.planner=bytescale --set plan.capacity=400"
  "ppbal3     3 1e-5 --set plan.balance=pp --set plan.capacity=400"
  "zero3      3 1e-5 --set plan.capacity=400 --set optim.zero1=true"
  "tp2        2 1e-5 --set parallel.tp=2 --set plan.capacity=4096"
  "tp2_ring2  4 1e-5 --set parallel.tp=2 --set plan.capacity=512"
  "tp2_ring3  6 1e-5 --set parallel.tp=2 --set plan.capacity=400 --set optim.zero1=true"
  "tp4_ring2  8 1e-5 --set parallel.tp=4 --set plan.capacity=512"
  "tp2_steps3 4 1e-5:1e-5 --set run.steps=3 --set parallel.tp=2 --set plan.capacity=512"
  "tp2_untied 4 1e-5 --set parallel.tp=2 --set plan.capacity=512 --set model.tied_embeddings=false"
  "tp2_sp       2 1e-5 --set parallel.tp=2 --set parallel.sequence_parallel=true --set plan.capacity=4096"
  "tp2_sp_ring3 6 1e-5 --set parallel.tp=2 --set parallel.sequence_parallel=true --set plan.capacity=400"
  "tp4_sp_ring2 8 1e-5 --set parallel.tp=4 --set parallel.sequence_parallel=true --set plan.capacity=512"
  "tp2_sp_steps3 4 1e-5:1e-5 --set run.steps=3 --set parallel.tp=2 --set parallel.sequence_parallel=true --set plan.capacity=512 --set optim.zero1=true"
  "tp2_sp_untied 4 1e-5 --set parallel.tp=2 --set parallel.sequence_parallel=true --set plan.capacity=512 --set model.tied_embeddings=false"
  "pp2          2 1e-5 --set parallel.pp=2 --set plan.capacity=4096"
  "pp2_ring3    6 1e-5 --set parallel.pp=2 --set plan.capacity=400"
  "pp3_uneven   3 1e-5 --set model.n_layers=5 --set parallel.pp=3 --set parallel.stage_layers=[1,3,1] --set plan.capacity=4096"
  "pp3_tp2_ring2 12 1e-5 --set model.n_layers=5 --set parallel.pp=3 --set parallel.stage_layers=[2,1,2] --set parallel.tp=2 --set plan.capacity=512"
  "uly2         2 1e-5 --set plan.cp_algorithm=ulysses --set plan.capacity=512"
  "uly4         4 1e-5 --set plan.cp_algorithm=ulysses --set plan.capacity=300"
  "hyb4         4 1e-5 --set plan.cp_algorithm=hybrid --set plan.capacity=300"
  "auto3        3 1e-5 --set plan.cp_algorithm=auto --set plan.capacity=400"
  "tp2_uly2     4 1e-5 --set parallel.tp=2 --set plan.cp_algorithm=ulysses --set plan.capacity=512"
  "pp2_uly2     4 1e-5 --set parallel.pp=2 --set plan.cp_algorithm=ulysses --set plan.capacity=512"
  "ppbal_pp2    6 1e-5 --set parallel.pp=2 --set plan.balance=pp --set plan.capacity=512 --set data.seq_len=300"
  "pp2_tp2_ring2 8 1e-5 --set parallel.pp=2 --set parallel.tp=2 --set plan.capacity=512"
  "pp2_tp2_sp_ring2 8 1e-5 --set parallel.pp=2 --set parallel.tp=2 --set parallel.sequence_parallel=true --set plan.capacity=512"
  "pp2_untied_steps3 4 1e-5:1e-5 --set run.steps=3 --set parallel.pp=2 --set plan.capacity=512 --set optim.zero1=true --set model.tied_embeddings=false"
)
# On the GPU (run.backend=cuda is added; the trainers share the GPU, rings on
# it): fp32 to 1e-4 (other summation orders), bf16 to 5e-2; offload2 with
# selective offloading (long pieces keep activations in host memory). The
# 3-step cases dump step 2, after two updates on the GPU (AdamW, ZeRO-1
# shards, the gradient reduction over NCCL for one trainer, through MPI for
# trainers sharing the GPU). The gpu_tp2 cases run tensor parallelism on the
# GPU: the trainers share it, so the TP sums go through host memory (MPI).
invariance_gpu_cases=(
  "gpu1     1 1e-4 --set run.precision=fp32 --set plan.planner=hdp --set plan.capacity=4096"
  "gpu2     2 1e-4 --set run.precision=fp32 --set plan.planner=hdp --set plan.capacity=512"
  "gpu3     3 1e-4 --set run.precision=fp32 --set plan.planner=hdp --set plan.capacity=400"
  "static4  4 1e-4 --set run.precision=fp32 --set plan.planner=static --set plan.capacity=256"
  "bf16_2   2 5e-2 --set run.precision=bf16 --set plan.planner=hdp --set plan.capacity=512"
  "offload2 2 1e-4 --set run.precision=fp32 --set plan.capacity=400 --set plan.offload=true"
  "steps1_nccl 1 1e-3:1e-3 --set run.steps=3 --set run.precision=fp32 --set run.gpu_comm=nccl --set plan.capacity=4096"
  "steps3      3 1e-3:1e-3 --set run.steps=3 --set run.precision=fp32 --set plan.capacity=400"
  "steps3_zero 3 1e-3:1e-3 --set run.steps=3 --set run.precision=fp32 --set plan.capacity=400 --set optim.zero1=true"
  "gpu_tp2        2 1e-4 --set run.precision=fp32 --set parallel.tp=2 --set plan.capacity=4096"
  "gpu_tp2_ring2  4 1e-4 --set run.precision=fp32 --set parallel.tp=2 --set plan.capacity=512"
  "bf16_tp2       2 5e-2 --set run.precision=bf16 --set parallel.tp=2 --set plan.capacity=4096"
  "gpu_tp2_steps3 4 1e-3:1e-3 --set run.steps=3 --set run.precision=fp32 --set parallel.tp=2 --set plan.capacity=512 --set optim.zero1=true"
  # Ulysses and hybrid attention on the GPU (all-to-alls through host memory:
  # the trainers share the GPU); 4 heads on 2 KV heads, so uly4 and tp2_uly2
  # give each member one query head and a KV head some members share.
  "gpu_uly2     2 1e-4 --set run.precision=fp32 --set plan.cp_algorithm=ulysses --set plan.capacity=512"
  "gpu_uly4     4 1e-4 --set run.precision=fp32 --set plan.cp_algorithm=ulysses --set plan.capacity=300"
  "gpu_hyb4     4 1e-4 --set run.precision=fp32 --set plan.cp_algorithm=hybrid --set plan.capacity=300"
  "gpu_auto3    3 1e-4 --set run.precision=fp32 --set plan.cp_algorithm=auto --set plan.capacity=400"
  "gpu_tp2_uly2 4 1e-4 --set run.precision=fp32 --set parallel.tp=2 --set plan.cp_algorithm=ulysses --set plan.capacity=512"
  "bf16_uly2    2 5e-2 --set run.precision=bf16 --set plan.cp_algorithm=ulysses --set plan.capacity=512"
  # Pipeline stages on the GPU (1F1B; stage transfers through host memory:
  # the trainers share the GPU), rings, Ulysses and TP inside a stage, tied
  # and untied embeddings.
  "gpu_pp2        2 1e-4 --set run.precision=fp32 --set parallel.pp=2 --set plan.capacity=4096"
  "gpu_pp2_ring2  4 1e-4 --set run.precision=fp32 --set parallel.pp=2 --set plan.capacity=512"
  "gpu_pp3_uneven 3 1e-4 --set run.precision=fp32 --set parallel.pp=3 --set parallel.stage_layers=[1,2,1] --set plan.capacity=4096"
  "gpu_pp2_tp2    4 1e-4 --set run.precision=fp32 --set parallel.pp=2 --set parallel.tp=2 --set plan.capacity=4096"
  "gpu_pp2_steps3 4 1e-3:1e-3 --set run.steps=3 --set run.precision=fp32 --set parallel.pp=2 --set plan.capacity=512 --set optim.zero1=true"
  "gpu_pp2_untied_steps3 4 1e-3:1e-3 --set run.steps=3 --set run.precision=fp32 --set parallel.pp=2 --set plan.capacity=512 --set model.tied_embeddings=false"
  "bf16_pp2       2 5e-2 --set run.precision=bf16 --set parallel.pp=2 --set plan.capacity=4096"
  "gpu_pp2_uly2   4 1e-4 --set run.precision=fp32 --set parallel.pp=2 --set plan.cp_algorithm=ulysses --set plan.capacity=512"
  # The NCCL code paths with the trainers sharing one GPU: cases named shim_*
  # preload the test-only NCCL over MPI ($nccl_shim, tests/kernels/nccl_shim),
  # and run.gpu_comm=nccl makes every transfer take NCCL's path: rings,
  # Ulysses and hybrid all-to-alls, TP sums, stage links, gradient buckets,
  # ZeRO-1's all-gather and the group splits.
  "shim_ring3      3 1e-4 --set run.precision=fp32 --set run.gpu_comm=nccl --set plan.capacity=400"
  "shim_uly4       4 1e-4 --set run.precision=fp32 --set run.gpu_comm=nccl --set plan.cp_algorithm=ulysses --set plan.capacity=300"
  "shim_hyb4       4 1e-4 --set run.precision=fp32 --set run.gpu_comm=nccl --set plan.cp_algorithm=hybrid --set plan.capacity=300"
  "shim_tp2_ring2  4 1e-4 --set run.precision=fp32 --set run.gpu_comm=nccl --set parallel.tp=2 --set plan.capacity=512"
  "shim_pp2_ring2  4 1e-4 --set run.precision=fp32 --set run.gpu_comm=nccl --set parallel.pp=2 --set plan.capacity=512"
  "shim_steps3_zero 3 1e-3:1e-3 --set run.steps=3 --set run.precision=fp32 --set run.gpu_comm=nccl --set plan.capacity=400 --set optim.zero1=true"
  "shim_bf16_ring2 2 5e-2 --set run.precision=bf16 --set run.gpu_comm=nccl --set plan.capacity=512"
)

# invariance_config BACKEND: the config, on stdout (write it to $dir/c.yaml).
invariance_config() {
  # 8 query heads on 4 KV heads (GQA) split 1, 2 or 4 ways (parallel.tp); a
  # vocabulary of 257 splits unevenly.
  local model="{vocab_size: 257, d_model: 32, n_layers: 2, n_heads: 8, n_kv_heads: 4, ffn_dim: 64}"
  # The GPU attention kernels take head_dim 64 or 128; 4 layers leave 2 to
  # offload (plan.offload keeps the first and last resident); 4 query heads
  # on 2 KV heads split 2 ways (parallel.tp=2 needs n_kv_heads even).
  [[ $1 == cuda ]] && model="{vocab_size: 257, d_model: 256, n_layers: 4, n_heads: 4, n_kv_heads: 2, ffn_dim: 160}"
  cat <<YAML
run: {timeout: 120, steps: 1, dir: $dir/run}
cluster: {roles: {constructors: 1, loaders: 1}}
model: $model
data:
  seq_len: 1024
  tokens_per_step: 3000
  sources: [{name: docs, path: $dir/docs}]
log: {metrics: false}
YAML
}

# invariance_case LINE: splits a case line into case_name, case_trainers,
# case_tol and the array case_args.
invariance_case() {
  local rest
  read -r case_name case_trainers case_tol rest <<<"$1"
  read -ra case_args <<<"$rest"
}

# invariance_steps ARGS...: the run.steps that train arguments set (1 if none).
invariance_steps() {
  local steps=1 a
  for a in "$@"; do [[ $a == run.steps=* ]] && steps=${a#run.steps=}; done
  echo "$steps"
}

# invariance_run NAME TRAINERS ARGS...: trains on TRAINERS trainers (plus a
# loader and a constructor) and dumps the last step; the exit status is
# meshloom's (mpirun's), 124 past 300 s.
# A case named shim_* runs with the NCCL shim preloaded (the caller's nccl_shim:
# the path of libmeshloom_nccl_shim.so).
invariance_run() {
  local name=$1 t=$2
  shift 2
  local last=$(($(invariance_steps "$@") - 1))
  local -a preload=()
  if [[ $name == shim_* ]]; then
    [[ -f ${nccl_shim:-} ]] || { echo "$name: no NCCL shim (nccl_shim='${nccl_shim:-}')" >"$dir/$name.txt"; return 1; }
    preload=(-x "LD_PRELOAD=$nccl_shim")
  fi
  timeout 300 "$mpiexec" --oversubscribe --bind-to none "${preload[@]}" -np $((2 + t)) "$meshloom" train \
    -c "$dir/c.yaml" --dump-step "$last" "$dir/$name.h5" "$@" >"$dir/$name.txt" 2>&1
}

# invariance_over_nccl NAME: whether a shim_* case's trainers summed gradients over NCCL.
invariance_over_nccl() { grep -q "gradients over NCCL" "$dir/$1.txt"; }

# invariance_on_gpu NAME: whether the run's trainers said they compute on the GPU.
invariance_on_gpu() { grep -q "computes on GPU" "$dir/$1.txt"; }

# invariance_compare PYTHON COMPARE_DUMPS NAME TOL ARGS...: the case's dump
# against the reference's (ARGS: the case's train arguments). A case of
# several steps, or one that changes the model (model.* settings, e.g. an
# untied head) or the data (data.* settings), is compared with a reference of
# as many steps and the same model and data, made here on first use ($dir/ref_sN[_KEY=VALUE...].h5); TOL is GRADS or
# GRADS:PARAMS.
invariance_compare() {
  local python=$1 compare=$2 name=$3 tol=$4
  shift 4
  local steps ref=ref a
  local -a same=()
  steps=$(invariance_steps "$@")
  for a in "$@"; do [[ $a == model.* || $a == data.* ]] && same+=(--set "$a") && ref+=_${a#*.}; done
  if ((steps > 1)); then
    ref+=_s$steps
    same+=(--set run.steps="$steps")
  fi
  if ((${#same[@]} > 0)); then
    [[ -f $dir/$ref.h5 ]] || invariance_run "$ref" "${invariance_ref[@]}" "${same[@]}" ||
      { cat "$dir/$ref.txt"; return 1; }
  fi
  # shellcheck disable=SC2086  # GRADS:PARAMS becomes two arguments
  "$python" "$compare" "$dir/$ref.h5" "$dir/$name.h5" ${tol/:/ }
}
