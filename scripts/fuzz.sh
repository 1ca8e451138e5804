#!/usr/bin/env bash
# fuzz.sh: build the libFuzzer harnesses of fuzz/ (clang 14, ASan + UBSan) and
# run one target or all of them, each for SECONDS, on a copy of its seed corpus
# and regression inputs; print a table and write it as CSV (docs/fuzzing.md).
#
#   scripts/fuzz.sh                    every target, 60 s each
#   scripts/fuzz.sh protocol 600       one target, 10 minutes
#   scripts/fuzz.sh all 600            every target, 10 minutes each
#   FUZZ_JOBS=4 scripts/fuzz.sh all 600   four targets at a time
#
# Environment: FUZZ_BUILD_DIR (build-fuzz), FUZZ_JOBS (targets run at once, 1),
# FUZZ_OUT (results folder, FUZZ_BUILD_DIR/runs/DATE-TIME), BUILD_JOBS (2),
# FUZZ_NICE (15: fuzzers and the build run under nice), FUZZ_ARGS (more
# libFuzzer flags). A target stops at its first finding, as libFuzzer does; the
# input is in FUZZ_OUT/findings/TARGET/. Exit status 1 if any target found one.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
say() { printf '[fuzz] %s\n' "$*"; }

TARGETS=(config indexed_dataset jsonl tar tiktoken gpt2_vocab hf_json checkpoint protocol image webdataset safetensors)
target=${1:-all}
seconds=${2:-60}
if [[ $target != all && ! " ${TARGETS[*]} " == *" $target "* ]]; then
  echo "fuzz.sh: unknown target '$target'; the targets are: all ${TARGETS[*]}" >&2
  exit 2
fi
[[ $seconds =~ ^[0-9]+$ && $seconds -gt 0 ]] || { echo "fuzz.sh: SECONDS must be a positive integer, not '$seconds'" >&2; exit 2; }
[[ $target == all ]] && run=("${TARGETS[@]}") || run=("$target")

BUILD=${FUZZ_BUILD_DIR:-build-fuzz}
NICE=(nice -n "${FUZZ_NICE:-15}")
if ! command -v clang++-14 >/dev/null || ! ls /usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  say "installing clang 14 and libFuzzer"
  WITH_FUZZ=1 SETUP_NO_BUILD=1 scripts/setup.sh
fi
if [[ ! -f $BUILD/build.ninja ]]; then
  say "configuring $BUILD (clang 14, libFuzzer + ASan + UBSan, CPU only)"
  "${NICE[@]}" cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
    -DMESHLOOM_CUDA=OFF -DMESHLOOM_TESTS=OFF -DMESHLOOM_FUZZ=ON >/dev/null
fi
say "building ${run[*]} (${BUILD_JOBS:-2} jobs)"
"${NICE[@]}" cmake --build "$BUILD" -j "${BUILD_JOBS:-2}" --target "${run[@]/#/fuzz_}"

# Known leaks outside meshloom (HDF5), each with its reason in the file.
export LSAN_OPTIONS="suppressions=$root/fuzz/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
OUT=${FUZZ_OUT:-$BUILD/runs/$(date -u +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
say "running ${#run[@]} target(s) for ${seconds}s each, ${FUZZ_JOBS:-1} at a time; results in $OUT"

# One target: corpus copy, findings folder, log; writes OUT/TARGET.row.
fuzz_one() {
  local t=$1 corpus=$OUT/corpus/$1 findings=$OUT/findings/$1 log=$OUT/logs/$1.log
  mkdir -p "$corpus" "$findings" "$OUT/logs"
  cp -r fuzz/corpus/"$t"/. "$corpus"/
  [[ -d fuzz/regressions/$t ]] && cp -r fuzz/regressions/"$t"/. "$corpus"/
  local dict=()
  [[ -f fuzz/dict/$t.dict ]] && dict=(-dict="$root/fuzz/dict/$t.dict")
  local start=$SECONDS rc=0
  # shellcheck disable=SC2086
  (cd "$OUT" && "${NICE[@]}" "$root/$BUILD/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb=2048 -malloc_limit_mb=2048 -close_fd_mask=3 -print_final_stats=1 \
    -artifact_prefix="$findings/" "${dict[@]}" ${FUZZ_ARGS:-} "$corpus") >"$log" 2>&1 || rc=$?
  local elapsed=$((SECONDS - start))
  local execs rate files bytes found
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n1)
  if [[ -z $execs ]]; then  # killed before its final stats: the last status line
    execs=$(grep -oE '^#[0-9]+' "$log" | tail -n1 | tr -d '#')
    rate=$(grep -oE 'exec/s: [0-9]+' "$log" | tail -n1 | grep -oE '[0-9]+')
  fi
  files=$(find "$corpus" -type f | wc -l)
  bytes=$(du -sb "$corpus" | cut -f1)
  found=$(find "$findings" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
  ((rc != 0 && found == 0)) && found="rc=$rc"
  echo "$t,$elapsed,${execs:-0},${rate:-0},$files,$bytes,$found" >"$OUT/$t.row"
}

# Progress: every 30 s, each running target's latest status line.
progress() {
  while sleep 30; do
    for t in "${run[@]}"; do
      [[ -f $OUT/logs/$t.log && ! -f $OUT/$t.row ]] || continue
      line=$(grep -E '^#[0-9]+' "$OUT/logs/$t.log" | tail -n1 | cut -c1-110)
      say "$t: ${line:-starting}"
    done
  done
}
progress &
progress_pid=$!
trap 'kill $progress_pid 2>/dev/null || true' EXIT

jobs_max=${FUZZ_JOBS:-1}
for t in "${run[@]}"; do
  while (($(jobs -rp | wc -l) > jobs_max)); do sleep 1; done  # +1: the progress loop
  say "start $t"
  fuzz_one "$t" &
done
for pid in $(jobs -rp); do
  [[ $pid == "$progress_pid" ]] || wait "$pid" || true
done
kill $progress_pid 2>/dev/null || true

csv=$OUT/fuzz.csv
echo "target,seconds,executions,exec_per_s,corpus_files,corpus_bytes,findings" >"$csv"
for t in "${run[@]}"; do cat "$OUT/$t.row" >>"$csv"; done
echo
column -t -s, "$csv"
echo
say "table: $csv; logs: $OUT/logs; findings: $OUT/findings"
if awk -F, 'NR > 1 && $7 != "0" { bad = 1 } END { exit !bad }' "$csv"; then
  say "FINDINGS: see $OUT/findings (add each input to fuzz/regressions/TARGET/ once fixed)"
  exit 1
fi
