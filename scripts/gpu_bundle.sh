#!/usr/bin/env bash
# gpu_bundle.sh: the GPU tests and benchmarks as one self-contained folder, for
# a GPU machine that has the CUDA toolkit but none of the Debian packages
# meshloom builds against (the lent device machines: CUDA 13, cuBLAS, NCCL as
# a Python wheel; no OpenMPI, HDF5, yaml-cpp or OpenBLAS). Builds the targets
# here, copies them and the shared libraries they need, other than CUDA's and
# the C and C++ runtimes, into build-bundle/ (git-ignored, small enough to
# carry: under 64 MiB), and writes build-bundle/run.sh for the GPU machine:
#
#   build-bundle/run.sh [tests] [sanitize] [bench]     (default: all three)
#     tests     every GPU test binary; gtest XML and logs
#     sanitize  compute-sanitizer memcheck, racecheck, synccheck, initcheck on
#               the attention kernels and the offloading model test
#     bench     attention_bench and gpu_step_bench, raw outputs for
#               `RAW=DIR scripts/bench_step_gpu.sh` back here
#   Results go to $OUT (or build-bundle/out); a summary table is printed last.
#
# Not in the bundle: tests that need mpirun (device_ring_test, nccl_comm_test,
# train_cuda_matches_cpu) and the meshloom binary itself (HDF5, OpenMPI).
#
#   scripts/gpu_bundle.sh            build the bundle (BUILD_DIR, default build)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD_DIR:-build}
bundle=build-bundle
tests=(device_info_test gemm_gpu_test attention_gpu_test ops_gpu_test embedding_gpu_test
       gpu_transformer_test comm_logic_test)
benches=(attention_bench gpu_step_bench)

[[ -f $BUILD/build.ninja ]] || scripts/setup.sh
grep -q '^MESHLOOM_CUDA:BOOL=ON' "$BUILD/CMakeCache.txt" 2>/dev/null ||
  grep -q 'meshloom_kernels' "$BUILD/build.ninja" ||
  { echo "gpu_bundle: $BUILD is a CPU-only build (no nvcc or NCCL found)" >&2; exit 1; }
echo "[gpu_bundle] building ${tests[*]} ${benches[*]}"
cmake --build "$BUILD" --target "${tests[@]}" "${benches[@]}" >/dev/null

rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib"
for t in "${tests[@]}" "${benches[@]}"; do
  path=$(find "$BUILD" -type f -name "$t" -perm -u+x | head -1)
  [[ -n $path ]] || { echo "gpu_bundle: $t was not built" >&2; exit 1; }
  cp "$path" "$bundle/bin/"
  strip --strip-unneeded "$bundle/bin/$t"
done
# Libraries: what ldd resolves outside CUDA, glibc and the C++ runtime (the GPU
# machine has newer ones of those).
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libnccl)'
for b in "$bundle"/bin/*; do
  ldd "$b" | awk '$3 ~ /^\// { print $1, $3 }'
done | sort -u | while read -r name path; do
  [[ $name =~ $skip ]] && continue
  cp -L "$path" "$bundle/lib/$name"
done

cat >"$bundle/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs the meshloom GPU bundle (made by scripts/gpu_bundle.sh) on a GPU machine.
#   run.sh [tests] [sanitize] [bench]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$here/out}
mkdir -p "$out"
parts=${*:-tests sanitize bench}
# CUDA's libraries: the toolkit's, else the Python wheels' (nvidia-nccl-cu13 and co.).
libs=$here/lib
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
export LD_LIBRARY_PATH=$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
summary=$out/summary.md
{
  echo "# meshloom GPU bundle, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1
  echo
  echo "| part | what | result | seconds |"
  echo "| --- | --- | --- | ---: |"
} >"$summary"
nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 >"$out/gpu.txt"
missing=$(for b in "$here"/bin/*; do ldd "$b" | grep 'not found'; done | sort -u)
[[ -z $missing ]] || { echo "unresolved libraries:"; echo "$missing"; }
row() { echo "| $1 | $2 | $3 | $4 |" >>"$summary"; }
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
if [[ $parts == *tests* ]]; then
  for t in device_info_test comm_logic_test gemm_gpu_test ops_gpu_test embedding_gpu_test \
           attention_gpu_test gpu_transformer_test; do
    timed "$out/$t.log" "$here/bin/$t" --gtest_output="xml:$out/$t.xml"
    row tests "$t" "$(gtest_result "$out/$t.log" $rc)" $secs
    echo "[run.sh] $t: $(gtest_result "$out/$t.log" $rc)"
  done
fi
if [[ $parts == *sanitize* ]]; then
  if command -v compute-sanitizer >/dev/null; then
    for tool in memcheck racecheck synccheck initcheck; do
      for spec in "attention_gpu_test:*bf16_D128_padded*:*fp32_D64_padded*" \
                  "gpu_transformer_test:*Offload*"; do
        t=${spec%%:*} filter=${spec#*:}
        timed "$out/sanitize_${tool}_$t.log" compute-sanitizer --tool "$tool" --error-exitcode 9 \
          "$here/bin/$t" --gtest_filter="$filter"
        errors=$(grep -o 'ERROR SUMMARY: [0-9]* error' "$out/sanitize_${tool}_$t.log" | tail -1)
        row sanitize "$tool $t" "rc $rc, ${errors:-no summary}" $secs
        echo "[run.sh] $tool $t: rc $rc ${errors}"
      done
    done
  else
    row sanitize compute-sanitizer "not found" 0
  fi
fi
if [[ $parts == *bench* ]]; then
  timed "$out/step_gpu_attention.txt" "$here/bin/attention_bench" --heads 16 --kv-heads 16 --dim 128 --iters 20
  row bench attention_bench "rc $rc: $(grep -E '^(forward|backward)' "$out/step_gpu_attention.txt" | tr '\n' ' ')" $secs
  timed "$out/step_gpu_model.txt" "$here/bin/gpu_step_bench" tokens="${TOKENS:-32768}" layers="${LAYERS:-16}" iters=5
  row bench gpu_step_bench "rc $rc: $(tr ' ' '\n' <"$out/step_gpu_model.txt" | grep -E '^(mfu|tflops|step_seconds)=' | tr '\n' ' ')" $secs
fi
echo
cat "$summary"
RUN
chmod +x "$bundle/run.sh"
size=$(du -sm "$bundle" | cut -f1)
echo "[gpu_bundle] $bundle: $(ls "$bundle/bin" | wc -l) programs, $(ls "$bundle/lib" | wc -l) libraries ($(ls "$bundle/lib" | tr '\n' ' ')), ${size} MiB"
((size < 64)) || echo "[gpu_bundle] warning: over 64 MiB, too large to carry to the device machine" >&2
echo "[gpu_bundle] on the GPU machine: $bundle/run.sh   (results in \$OUT or $bundle/out)"
