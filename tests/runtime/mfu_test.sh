#!/usr/bin/env bash
# MFU is never reported above 100%:
#  - with busy loops on every core while the run starts (the sgemm peak is
#    measured under load, so it comes out low), every step's metrics.jsonl
#    `mfu` is at most 1 or null, and where one is null the log says
#    "MFU n/a (peak unknown)" and the one warning names run.peak_gflops;
#  - with run.peak_gflops far below what the trainers reach, every `mfu` is
#    null, every step line says "MFU n/a (peak unknown)", and there is
#    exactly one warning, naming run.peak_gflops.
#   mfu_test.sh MESHLOOM MPIEXEC
set -u
meshloom=$1 mpiexec=$2
# shellcheck source=tests/common/testlib.sh
source "$(dirname "$0")/../common/testlib.sh"
prepare_docs docs 'a*'
cat >"$dir/c.yaml" <<YAML
run: {timeout: 60, steps: 8}
cluster: {roles: {constructors: 1, loaders: 1}}
model: {vocab_size: 257, d_model: 128, n_layers: 2, n_heads: 4, n_kv_heads: 2, ffn_dim: 352}
plan: {capacity: 1024}
data: {seq_len: 1024, tokens_per_step: 2048, sources: [{name: docs, path: $dir/docs}]}
log: {every: 1}
YAML

# train RUN ARGS...: 4 ranks (1 constructor, 1 loader, 2 trainers) in the background.
train() {
  local run=$1
  shift
  timeout 120 "$mpiexec" --oversubscribe --bind-to none -np 4 "$meshloom" train -c "$dir/c.yaml" \
    --set run.dir="$dir/$run" "$@" >"$dir/$run.log" 2>&1 &
}
finished() { wait "$1" || { cat "$dir/$2.log"; fail "$2: meshloom train failed"; }; }

# check_mfu RUN: every mfu <= 1 or null; prints how many were null.
check_mfu() {
  /usr/bin/python3 - "$dir/$1/metrics.jsonl" <<'PY' || { cat "$dir/$1.log"; fail "$1: an MFU above 100%"; }
import json, sys
mfu = [r["mfu"] for r in map(json.loads, open(sys.argv[1])) if "step" in r]
assert len(mfu) == 8, f"{len(mfu)} steps"
assert all(m is None or 0 <= m <= 1 for m in mfu), mfu
print(sum(m is None for m in mfu))
PY
}

# The load: 8 busy loops a core from before the start until step 0's line,
# when the peak has been measured.
burners=()
for _ in $(seq $((8 * $(nproc)))); do
  (while :; do :; done) &
  burners+=($!)
done
train loaded
job=$!
for _ in $(seq 600); do
  [[ -s $dir/loaded/metrics.jsonl ]] || ! kill -0 "$job" 2>/dev/null && break
  sleep 0.1
done
kill "${burners[@]}"
finished "$job" loaded
nulls=$(check_mfu loaded) || exit 1
grep "MFU is against" "$dir/loaded.log"
if ((nulls > 0)); then
  grep -q "MFU n/a (peak unknown)" "$dir/loaded.log" || { cat "$dir/loaded.log"; fail "null mfu, but no 'MFU n/a' in the log"; }
  grep -q "above 100%.*run.peak_gflops" "$dir/loaded.log" || { cat "$dir/loaded.log"; fail "no warning naming run.peak_gflops"; }
fi
echo "ok: peak measured under load: every MFU at most 100% ($nulls of 8 steps n/a)"

train low --set run.peak_gflops=0.001
finished $! low
nulls=$(check_mfu low) || exit 1
((nulls == 8)) || fail "run.peak_gflops 0.001: $((8 - nulls)) steps with an MFU"
[[ $(grep -c "step .* MFU n/a (peak unknown)" "$dir/low.log") == 8 ]] ||
  { cat "$dir/low.log"; fail "not every step line says MFU n/a (peak unknown)"; }
[[ $(grep -c "above 100%" "$dir/low.log") == 1 ]] || { cat "$dir/low.log"; fail "not exactly one warning"; }
grep -q "above 100%: run.peak_gflops 0.001 is below" "$dir/low.log" || fail "the warning does not name run.peak_gflops"
echo "ok: run.peak_gflops too low: MFU n/a on every step, one warning"
