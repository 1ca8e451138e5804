#!/usr/bin/env bash
# Runs the meshloom GPU bundle on a GPU machine: scripts/gpu/gpu_bundle.sh copies
# this script to build-bundle/run.sh, beside bundle.tar.xz.
#   run.sh [tests] [mpi] [train] [bench] [sanitize] [cpu] [hf] [eval]
# runs the parts named, in the order named (default: the first five, in this
# order; scripts/gpu/gpu_bundle.sh says what each does). CASES (a regex of
# case names) limits train's cases; SANITIZE_TOOLS (a list) and
# SANITIZE_TESTS (a regex of test programs) sanitize's runs.
# Unpacks bundle.tar.xz into $BUNDLE_DIR (default /tmp/meshloom-bundle) once.
# Results go to $OUT (default: out/ beside this script), a few files (the device
# machine returns 8 at most), each brought up to date as the parts go:
# summary.md, logs.tar.gz (every log and gtest XML), gpu.txt,
# step_gpu_attention.txt, step_gpu_model.txt and step_gpu_torch.txt (bench),
# train_dumps.tar.gz (train; split into .partNN pieces past 15 MiB).
# PEER_SECONDS (default 90, 0: skip) is the PyTorch peer's time budget in
# bench, its compilation included; it is stopped 60 s past it.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$here/out}
parts=("$@")
((${#parts[@]})) || parts=(tests mpi train bench sanitize)
for p in "${parts[@]}"; do
  [[ $p =~ ^(tests|mpi|train|bench|sanitize|cpu|hf|eval)$ ]] ||
    { echo "run.sh: unknown part '$p' (tests mpi train bench sanitize cpu hf eval)" >&2; exit 2; }
done
mkdir -p "$out" || exit 1
# Logs and gtest XML, packed into $out/logs.tar.gz after each step.
logs=$(mktemp -d "${TMPDIR:-/tmp}/meshloom-logs.XXXXXX") || { echo "run.sh: no temporary folder" >&2; exit 1; }
trap 'rm -rf "$logs"' EXIT

# The bundle: bundle.tar.xz beside this script, unpacked once (or, unpacked
# already, bin/ beside it).
b=$here
if [[ -f $here/bundle.tar.xz ]]; then
  b=${BUNDLE_DIR:-/tmp/meshloom-bundle}
  stamp=$(cksum <"$here/bundle.tar.xz")
  if [[ $(cat "$b/.stamp" 2>/dev/null) != "$stamp" ]]; then
    echo "[run.sh] unpacking bundle.tar.xz into $b"
    rm -rf "$b" && mkdir -p "$b" || exit 1
    if command -v xz >/dev/null; then
      xz -dc "$here/bundle.tar.xz" | tar -xf - -C "$b"
    elif command -v cmake >/dev/null; then
      (cd "$b" && cmake -E tar xf "$here/bundle.tar.xz")
    else
      python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
        "$here/bundle.tar.xz" "$b"
    fi || { echo "run.sh: cannot unpack $here/bundle.tar.xz" >&2; exit 1; }
    echo "$stamp" >"$b/.stamp"
  fi
fi

# Libraries: the bundle's, then CUDA's: the toolkit's, else the Python wheels'
# (nvidia-nccl-cu13 and co.). Set for the bundle's programs only (with_libs),
# not for the machine's own tools.
libs=$b/lib
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib; do [[ -d $d ]] && libs=$libs:$d; done
py=$(command -v python3 || true)
if [[ -n $py ]]; then
  for d in $("$py" - <<'PY' 2>/dev/null
import glob, os
try:
    import nvidia
    for root in nvidia.__path__:
        for lib in sorted(glob.glob(os.path.join(root, "*", "lib"))):
            print(lib)
except Exception:
    pass
PY
); do libs=$libs:$d; done
fi
libs=$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
with_libs() { (export LD_LIBRARY_PATH=$libs; "$@"); }

# OpenMPI, relocated into $b/mpi (checked with scripts/gpu/gpu_bundle_selftest.sh).
# Debian's build keeps its MCA components, help files and config outside its
# prefix, so OPAL_PREFIX alone is not enough: OPAL_PKGLIBDIR (components;
# without them mpirun knows no options), OPAL_PKGDATADIR (help files),
# OPAL_SYSCONFDIR (openmpi-mca-params.conf, the default hostfile). Its PMIx is
# a separate install: PMIX_PKGLIBDIR and PMIX_MCA_mca_base_component_path (its
# components), PMIX_PKGDATADIR (help files), PMIX_SYSCONFDIR (else its
# pmix-mca-params.conf names the system's component folder). plm isolated: the
# one-node launcher (the default, rsh, stops mpirun where there is no ssh).
# The processes that mpirun starts inherit all this. Root, oversubscribed, no
# CMA (containers), as the tests' environment in tests/CMakeLists.txt.
mpi=$b/mpi
mpirun=$mpi/bin/mpirun
export OPAL_PREFIX=$mpi OPAL_BINDIR=$mpi/bin OPAL_LIBDIR=$b/lib OPAL_PKGLIBDIR=$mpi/lib/openmpi \
  OPAL_PKGDATADIR=$mpi/share/openmpi OPAL_SYSCONFDIR=$mpi/etc
export PMIX_PKGLIBDIR=$mpi/lib/pmix PMIX_MCA_mca_base_component_path=$mpi/lib/pmix \
  PMIX_PKGDATADIR=$mpi/share/pmix PMIX_SYSCONFDIR=$mpi/etc
export OMPI_MCA_plm=isolated OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none \
  OMPI_MCA_mpi_yield_when_idle=1
[[ -d /dev/shm && -w /dev/shm ]] || export OMPI_MCA_btl_vader_backing_directory=/tmp
export PATH=$mpi/bin:$PATH

summary=$out/summary.md
{
  echo "# meshloom GPU bundle, $(date -u +%Y-%m-%dT%H:%M:%SZ), parts: ${parts[*]}"
  echo "bundle built from commit $(cat "$b/commit.txt" 2>/dev/null || echo unknown)"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1
  else
    echo "no nvidia-smi here"
  fi
  # Debian 12's libraries: glibc 2.36 and GLIBCXX_3.4.30 or newer needed.
  echo "$(ldd --version 2>&1 | head -1), $(uname -r)"
  echo
  echo "| part | what | result | seconds |"
  echo "| --- | --- | --- | ---: |"
} >"$summary"
nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 >"$out/gpu.txt"
row() { echo "| $1 | $2 | ${3//|//} | $4 |" >>"$summary"; }
pack() { tar -czf "$out/logs.tar.gz" -C "$logs" .; }
missing=$(for f in "$b"/bin/* "$mpi"/bin/* "$mpi"/lib/openmpi/*.so "$mpi"/lib/pmix/*.so; do
            with_libs ldd "$f" | grep 'not found' | sed "s|^|${f#"$b"/}: |"
          done | sort -u)
if [[ -n $missing ]]; then
  echo "unresolved libraries:"; echo "$missing"; echo "$missing" >"$logs/unresolved_libraries.txt"
  row bundle libraries "unresolved: $(echo "$missing" | awk '{ print $2 }' | sort -u | tr '\n' ' ')" 0
else
  row bundle libraries "all resolve (bin, mpi, MCA components)" 0
fi
gtest_result() {  # LOG RC
  local passed failed skipped
  passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$1" | tail -1)
  failed=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$1" | tail -1)
  skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$1" | tail -1)
  echo "rc $2: ${passed:-0} passed, ${failed:-0} failed, ${skipped:-0} skipped"
}
timed() {  # LOG CMD...: runs, sets rc and secs
  local log=$1 start=$SECONDS
  shift
  "$@" >"$log" 2>&1
  rc=$?
  secs=$((SECONDS - start))
}
part_tests() {
  for t in device_info_test cudnn_graph_test cudnn_attention_gpu_test comm_logic_test gemm_gpu_test \
           ops_gpu_test train_gpu_test embedding_gpu_test attention_gpu_test gpu_transformer_test; do
    [[ -x $b/bin/$t ]] || continue  # the cuDNN tests, in a bundle built without cuDNN
    timed "$logs/$t.log" with_libs "$b/bin/$t" --gtest_output="xml:$logs/$t.xml"
    row tests "$t" "$(gtest_result "$logs/$t.log" $rc)" $secs
    echo "[run.sh] $t: $(gtest_result "$logs/$t.log" $rc)"
    pack
  done
}
part_sanitize() {
  if command -v compute-sanitizer >/dev/null; then
    for tool in ${SANITIZE_TOOLS:-memcheck racecheck synccheck initcheck}; do
      for spec in "attention_gpu_test:*bf16_D128_padded*:*fp32_D64_padded*" \
                  "gpu_transformer_test:*Offload*"; do
        t=${spec%%:*} filter=${spec#*:}
        [[ $t =~ ${SANITIZE_TESTS:-.} ]] || continue
        log=$logs/sanitize_${tool}_$t.log
        timed "$log" with_libs compute-sanitizer --tool "$tool" --error-exitcode 9 \
          "$b/bin/$t" --gtest_filter="$filter"
        # racecheck prints its own summary line: hazards as errors and warnings
        errors=$(grep -o -E '(ERROR|RACECHECK) SUMMARY: .*' "$log" | tail -1)
        row sanitize "$tool $t" "rc $rc, ${errors:-no summary}" $secs
        echo "[run.sh] $tool $t: rc $rc ${errors}"
        pack
      done
    done
  else
    row sanitize compute-sanitizer "not found" 0
  fi
}
part_bench() {
  timed "$out/step_gpu_attention.txt" with_libs "$b/bin/attention_bench" --heads 16 --kv-heads 16 --dim 128 --iters 20
  row bench attention_bench "rc $rc: $(grep -E '^(forward|backward)' "$out/step_gpu_attention.txt" | tr '\n' ' ')" $secs
  # The wgmma kernel is on the tensor cores' Hopper path only if its machine
  # code holds HGMMA instructions (cuobjdump comes with the CUDA toolkit).
  local objdump so
  objdump=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
  so=$b/bin/libmeshloom_cuda.so
  if [[ -x $objdump && -f $so ]]; then
    row bench "HGMMA in SASS" "$("$objdump" -sass "$so" 2>/dev/null | grep -c HGMMA) in $(basename "$so")" 0
  fi
  timed "$out/step_gpu_model.txt" with_libs "$b/bin/gpu_step_bench" tokens="${TOKENS:-32768}" layers="${LAYERS:-16}" iters=5
  row bench gpu_step_bench "rc $rc: $(tr ' ' '\n' <"$out/step_gpu_model.txt" | grep -E '^(mfu|tflops|step_seconds)=' | tr '\n' ' ')" $secs
  part_bench_torch
}
# The same step in PyTorch (torch_peer.py), after meshloom's, under a time
# limit; python3's own libraries (not the bundle's), its JSON into the logs.
part_bench_torch() {
  local budget=${PEER_SECONDS:-90} py='' p result
  local txt=$out/step_gpu_torch.txt
  for p in python3 /usr/bin/python3 /usr/local/bin/python3; do
    if env -u LD_LIBRARY_PATH "$p" -c 'import torch' >/dev/null 2>&1; then py=$p; break; fi
  done
  if ((budget <= 0)) || [[ -z $py ]]; then
    result="skipped: $( ((budget <= 0)) && echo PEER_SECONDS=0 || echo "no python3 with torch here")"
    echo "torch_peer: $result" >"$txt"
    row bench torch_peer "$result" 0
    return
  fi
  timed "$txt" env -u LD_LIBRARY_PATH timeout "$((budget + 60))" "$py" "$b/torch_peer.py" \
    --tokens "${TOKENS:-32768}" --layers "${LAYERS:-16}" --time-budget "$budget" \
    --json "$logs/step_gpu_torch.json"
  case $rc in
    0) result="rc 0: $(grep -E '^(torch|attention|compile)=' "$txt" | tr '\n' ' ')$(tr ' ' '\n' <"$txt" | grep -E '^(mfu|tflops|step_seconds)=' | tr '\n' ' ')" ;;
    77) result="skipped: $(tail -1 "$txt")" ;;
    124) result="rc 124: stopped after $((budget + 60)) s ($(grep -c '^warm-up' "$txt") warm-up steps done)" ;;
    *) result="rc $rc: $(grep -m1 '^torch_peer: failed' "$txt" || tail -1 "$txt")" ;;
  esac
  row bench "torch_peer ($py)" "$(cut -c1-300 <<<"$result")" $secs
  echo "[run.sh] torch_peer: $result"
}
# The pipeline benchmark on real cores, a core per rank (2 cores at home run
# it with each rank capped by core_share.sh; this checks that emulation):
# scripts/bench/bench_pp.sh's runs on this machine's cores,
# into logs.tar.gz's bench_pp/ (RAW=DIR scripts/bench/bench_pp.sh makes the
# table back home). Needs the checkout around build-bundle/ (the device tool's
# copy) with data/bench_step's pydocs and fortunes (carried: git-ignored).
part_cpu() {
  local root=$here/.. f
  for f in pydocs.bin pydocs.idx fortunes.bin fortunes.idx; do
    [[ -f $root/data/bench_step/$f ]] && continue
    row cpu bench_pp.sh "skipped: needs the checkout and data/bench_step/$f beside build-bundle/" 0
    return
  done
  if [[ ! -x $root/scripts/bench/bench_pp.sh ]]; then
    row cpu bench_pp.sh "skipped: needs the checkout beside build-bundle/" 0
    return
  fi
  # In the background, packed and reported every 15 s: a run cut off by the
  # device time still brings back the steps done (2026-11-26's did not).
  local start=$SECONDS pid
  with_libs env -u OMPI_MCA_mpi_yield_when_idle MESHLOOM="$b/bin/meshloom" \
    RUNS_TO="$logs/bench_pp" "$root/scripts/bench/bench_pp.sh" >"$logs/bench_pp.log" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 15
    pack
    echo "[run.sh] bench_pp.sh, $((SECONDS - start)) s: $(tail -n1 "$logs/bench_pp.log" | cut -c1-60);" \
      "$(cat "$logs"/bench_pp/*.log 2>/dev/null | grep -c ' step ') steps logged"
  done
  wait "$pid"
  rc=$?
  row cpu "bench_pp.sh, $(nproc) cores" "rc $rc: $(tail -1 "$logs/bench_pp.log")" $((SECONDS - start))
  echo "[run.sh] bench_pp.sh: rc $rc"
  pack
}
# transformers against meshloom's Hugging Face import and export
# (docs/operations.md): a tiny random Llama checkpoint (llama3 RoPE scaling,
# rms_norm_eps 1e-6), imported and exported again, must load in transformers
# without warnings and give the original's logits, and the first step's loss
# of a run from it, on the CPU and on the GPU (fp32), must be transformers'.
part_hf() {
  local py='' p d=$logs/hf backend
  for p in python3 /usr/bin/python3 /usr/local/bin/python3; do
    env -u LD_LIBRARY_PATH "$p" -c 'import torch, transformers' >/dev/null 2>&1 && { py=$p; break; }
  done
  [[ -n $py ]] || { row hf transformers "skipped: no python3 with torch and transformers" 0; return; }
  mkdir -p "$d"
  env -u LD_LIBRARY_PATH "$py" "$b/make_hf_llama.py" "$d/hf" --dtype bf16 --d-model 32 --vocab 257 \
    --theta 10000 --eps 1e-6 --rope-scaling llama3 --std 0.1 --seed 5 >/dev/null &&
    with_libs "$b/bin/meshloom" import-hf "$d/hf" --out "$d/w.h5" >"$d/import.txt" 2>&1 &&
    with_libs "$b/bin/meshloom" export-hf "$d/w.h5" --out "$d/export" >"$d/export.txt" 2>&1 ||
    { row hf "import/export" "rc $?: $(tail -1 "$d"/*.txt | cut -c1-200)" 0; return; }
  printf 'run: {steps: 1}\nmodel: {init: "hf:%s"}\ndata: {seq_len: 48, tokens_per_step: 400, sources: [{name: d, path: %s, format: indexed}]}\n' \
    "$d/hf" "$b/data/docs" >"$d/run.yaml"
  local gpus=0
  for backend in cpu cuda; do
    [[ $backend == cuda ]] && gpus=1
    timed "$d/train_$backend.txt" with_libs "$mpirun" -np 3 "$b/bin/meshloom" train -c "$d/run.yaml" \
      --set run.dir="$d/run_$backend" --set run.backend=$backend --set run.precision=fp32 \
      --set cluster.gpus_per_node=$gpus \
      --dump-step 0 "$d/dump_$backend.h5"
    timed "$d/check_$backend.txt" env -u LD_LIBRARY_PATH "$py" "$b/hf_transformers_check.py" \
      "$d/hf" "$d/export" "$d/dump_$backend.h5"
    row hf "transformers on the export, $backend dump" "rc $rc: $(tr '\n' ' ' <"$d/check_$backend.txt" | cut -c1-300)" $secs
    echo "[run.sh] hf $backend: rc $rc"
  done
}
part_eval() {
  # Evaluation (#37) on the GPU against the CPU, fp32, on the bundled docs:
  # 4 steps with eval.every 2 (2 trainers; held-out pieces of 512 over rings
  # of 2 at plan.capacity 256), then meshloom eval --passkey from the CPU
  # run's last checkpoint. Held-out losses (total, by source, by position)
  # and every passkey score must agree within 1e-4 relative.
  local d=$logs/eval backend py=''
  mkdir -p "$d"
  printf 'run: {steps: 4, timeout: 120}\ncluster: {roles: {constructors: 1, loaders: 1}}\nmodel: {vocab_size: 257, d_model: 256, n_layers: 2, n_heads: 4, n_kv_heads: 2, ffn_dim: 160}\ndata: {seq_len: 512, tokens_per_step: 2048, sources: [{name: docs, path: %s, format: indexed, tokenizer: byte}]}\nplan: {capacity: 256}\neval: {holdout: 0.2, every: 2, tokens: 2048}\ncheckpoint: {every: 4}\n' \
    "$b/data/docs" >"$d/run.yaml"
  for backend in cpu cuda; do
    timed "$d/train_$backend.txt" with_libs "$mpirun" -np 4 "$b/bin/meshloom" train -c "$d/run.yaml" \
      --set run.dir="$d/run_$backend" --set checkpoint.dir="$d/ckpt_$backend" \
      --set run.backend=$backend --set run.precision=fp32
    row eval "train, eval.every 2, $backend" "rc $rc" $secs
    timed "$d/eval_$backend.txt" with_libs "$mpirun" -np 4 "$b/bin/meshloom" eval -c "$d/run.yaml" \
      --checkpoint "$d/ckpt_cpu/step_00000003.h5" --passkey 128,512 --set run.backend=$backend \
      --set run.precision=fp32 --out "$d/out_$backend" --report "$d/report_$backend.json"
    row eval "meshloom eval --passkey 128,512, $backend" "rc $rc" $secs
  done
  for p in python3 /usr/bin/python3; do "$p" -c 'import json' 2>/dev/null && { py=$p; break; }; done
  [[ -n $py ]] || { row eval compare "skipped: no python3" 0; return; }
  timed "$d/compare.txt" env -u LD_LIBRARY_PATH "$py" - "$d" <<'PY'
import json, sys
d, worst = sys.argv[1], 0.0
def rel(a, b):
    global worst
    worst = max(worst, abs(a - b) / max(abs(a), 1e-12))
evals = {b: [json.loads(l)["eval"] for l in open(f"{d}/run_{b}/metrics.jsonl") if '"eval"' in l]
         for b in ("cpu", "cuda")}
assert len(evals["cpu"]) == len(evals["cuda"]) == 2, evals
for a, g in zip(evals["cpu"], evals["cuda"]):
    rel(a["loss"], g["loss"])
    for x, y in zip(a["position_loss"], g["position_loss"]):
        rel(x[1], y[1])
    assert a["source_loss"].keys() == g["source_loss"].keys(), "the GPU gives no loss by source"
reports = {b: json.load(open(f"{d}/report_{b}.json")) for b in ("cpu", "cuda")}
rel(reports["cpu"]["loss"], reports["cuda"]["loss"])
prompts = {b: [json.loads(l) for l in open(f"{d}/out_{b}/passkey_prompts.jsonl")] for b in ("cpu", "cuda")}
for a, g in zip(prompts["cpu"], prompts["cuda"]):
    assert a["sequences"] == g["sequences"]
    for x, y in zip(a["scores"], g["scores"]):
        rel(x, y)
print(f"{'ok' if worst <= 1e-4 else 'FAIL'}: held-out losses and passkey scores, GPU against CPU, "
      f"worst {worst:.3g} relative (tol 1e-4)")
sys.exit(0 if worst <= 1e-4 else 1)
PY
  row eval "GPU against CPU" "rc $rc: $(tail -1 "$d/compare.txt" | cut -c1-200)" $secs
  echo "[run.sh] eval: $(tail -1 "$d/compare.txt")"
}
part_mpi() {
  # Every rank writes its gtest XML (NAME.npN.rankR.xml); rank 0 prints the
  # report (no colours: mpirun gives the ranks a terminal).
  # NAME:RANKS[:shim]: shim runs it with the test-only NCCL over MPI
  # preloaded, so that its NCCL cases run with the ranks sharing the GPU.
  for spec in device_ring_test:1 device_ring_test:2 device_ring_test:3 device_ulysses_test:1 \
              device_ulysses_test:2 device_ulysses_test:4 tp_gpu_test:2 nccl_comm_test:1 \
              device_ring_test:2:shim device_ring_test:3:shim device_ulysses_test:2:shim \
              device_ulysses_test:4:shim tp_gpu_test:2:shim nccl_comm_test:2:shim; do
    IFS=: read -r t np shim <<<"$spec"
    local -a preload=()
    local name=$t.np$np
    if [[ -n $shim ]]; then
      preload=(-x "LD_PRELOAD=$b/bin/libmeshloom_nccl_shim.so")
      name=$t.shim.np$np
    fi
    # shellcheck disable=SC2016  # expanded by sh, in each rank
    timed "$logs/$name.log" with_libs timeout 300 "$mpirun" --oversubscribe --bind-to none "${preload[@]}" \
      -np "$np" sh -c 'exec "$0" --gtest_color=no --gtest_output="xml:$1.rank${OMPI_COMM_WORLD_RANK:-0}.xml"' \
      "$b/bin/$t" "$logs/$name"
    row mpi "$t, $np rank(s)${shim:+, NCCL shim}" "$(gtest_result "$logs/$name.log" $rc)" $secs
    echo "[run.sh] $name: $(gtest_result "$logs/$name.log" $rc)"
    pack
  done
}
part_train() {
  # The GPU cases of tests/train/invariance_test.sh (invariance_cases.sh) on the
  # bundled data, each case's step dump and log into train_dumps.tar.gz, for
  # scripts/gpu/gpu_bundle_check.sh, which compares them with a CPU reference made
  # where meshloom was built. Where python3 has h5py, the dumps are compared
  # here too, with a CPU reference that the bundled meshloom makes here.
  dir=${TMPDIR:-/tmp}/meshloom-train meshloom=$b/bin/meshloom mpiexec=$mpirun
  nccl_shim=$b/bin/libmeshloom_nccl_shim.so  # for the shim_* cases
  rm -rf "$dir" && mkdir -p "$dir"
  # shellcheck source=tests/train/invariance_cases.sh
  source "$b/invariance_cases.sh"
  cp "$b/invariance_cases.sh" "$b/data/docs.bin" "$b/data/docs.idx" "$dir/"
  (cd "$dir" && sha256sum docs.bin docs.idx >data.sha256)
  invariance_config cuda >"$dir/c.yaml"
  cp "$out/gpu.txt" "$dir/"
  python_h5() { env -u LD_LIBRARY_PATH python3 "$@"; }
  error_line() { { grep -m1 -E 'meshloom: error|FATAL|Error' "$1" || tail -1 "$1"; } | cut -c1-200; }
  compare=no
  python_h5 -c 'import h5py, numpy' 2>/dev/null && compare=yes
  start=$SECONDS
  # shellcheck disable=SC2154  # invariance_ref, invariance_gpu_cases, case_*: invariance_cases.sh
  with_libs invariance_run ref "${invariance_ref[@]}"
  rc=$?
  echo "ref $rc" >"$dir/exit_codes.txt"
  result="rc $rc"
  ((rc == 0)) || result+=": $(error_line "$dir/ref.txt")"
  [[ $compare == yes ]] || result+=" (python3 has no h5py here: dumps compared back home only)"
  row train "ref: CPU, 1 trainer" "$result" $((SECONDS - start))
  for case in "${invariance_gpu_cases[@]}"; do
    invariance_case "$case"
    [[ $case_name =~ ${CASES:-.} ]] || continue  # CASES: a regex of the case names to run
    start=$SECONDS
    with_libs invariance_run "$case_name" "$case_trainers" --set run.backend=cuda "${case_args[@]}"
    rc=$?
    echo "$case_name $rc" >>"$dir/exit_codes.txt"
    result="rc $rc"
    if invariance_on_gpu "$case_name"; then result+=", on the GPU"; else result+=", not on the GPU"; fi
    if ((rc != 0)); then
      result+=": $(error_line "$dir/$case_name.txt")"
    elif [[ $compare == yes && -f $dir/ref.h5 ]]; then
      # with_libs: a case of several steps makes its CPU reference on first use
      compared=$(with_libs invariance_compare python_h5 "$b/compare_dumps.py" "$case_name" "$case_tol" "${case_args[@]}" 2>&1 | tail -1)
      result+=", $compared"
      # A dump that matched here stays here: the machine returns 8 files of
      # 16 MiB at most. gpu_bundle_check.sh reports this line for it.
      [[ $compared == ok:* ]] && echo "$case_name $compared" >>"$dir/compared_there.txt" &&
        rm -f "$dir/$case_name.h5"
    fi
    row train "$case_name: $case_trainers trainer(s) ${case_args[*]}" "$result" $((SECONDS - start))
    echo "[run.sh] $case_name: $result"
    pack_train
  done
  row train dumps "$(cd "$out" && echo train_dumps.tar.gz*) ($(du -ch "$out"/train_dumps.tar.gz* | tail -1 | cut -f1))" 0
}
# The dumps and logs so far, less the references' dumps (made again where
# they are checked), the dumps that matched here, and the data, into $out/train_dumps.tar.gz, or its 15 MiB pieces.
pack_train() {
  rm -f "$out"/train_dumps.tar.gz*
  tar -czf "$out/train_dumps.tar.gz" -C "$dir" --exclude=./run --exclude='./ref*.h5' \
    --exclude=./docs.bin --exclude=./docs.idx .
  if (($(stat -c %s "$out/train_dumps.tar.gz") > 15 * 1048576)); then
    split -b 15M -d "$out/train_dumps.tar.gz" "$out/train_dumps.tar.gz.part" && rm "$out/train_dumps.tar.gz"
  fi
}

for p in "${parts[@]}"; do
  "part_$p"
  pack
done
echo
cat "$summary"
