#!/usr/bin/env bash
# Checkpoints written by every trainer (checkpoint.collective, format 2) and
# read by any layout, end to end on real text:
#  - the same layout resumes bit-identically: tp 2, pp 2 with ZeRO-1, and
#    tp 1 without;
#  - a checkpoint written by 8 trainers (tp 2 x pp 2 x 2 data ranks, ZeRO-1)
#    resumes on 4 trainers (tp 1, pp 2) and on 6 (tp 2, pp 1, ZeRO-1 off):
#    the same batches, and losses within 1e-5 of the uninterrupted run over
#    the 5 steps after the checkpoint;
#  - format 1 (checkpoint.collective: false) is still written and read.
#   resume_layouts_test.sh MESHLOOM MPIEXEC
set -u
meshloom=$1 mpiexec=$2
source "$(dirname "$0")/../common/testlib.sh"
prepare_docs docs '[a-c]*'
cat >"$dir/c.yaml" <<YAML
run: {timeout: 60, steps: 8, threads: 1}
cluster: {roles: {constructors: 1, loaders: 1}}
model: {vocab_size: 257, d_model: 32, n_layers: 2, n_heads: 4, n_kv_heads: 2, ffn_dim: 64}
plan: {capacity: 512}
data:
  seq_len: 512
  tokens_per_step: 4096
  sources:
    - {name: docs, path: $dir/docs}
checkpoint: {every: 3, keep: 10}
YAML
train() {  # run-dir trainers args...
  local run=$1 t=$2
  shift 2
  timeout 240 "$mpiexec" --oversubscribe --bind-to none -np $((2 + t)) "$meshloom" train \
    -c "$dir/c.yaml" --set run.dir="$dir/$run" "$@" >>"$dir/$run.log" 2>&1 ||
    { tail -30 "$dir/$run.log"; fail "$run: training on $t trainers $*"; }
}
# compare REF RUN FIRST TOLERANCE: steps FIRST.. of RUN against REF: the
# same data, losses within TOLERANCE (relative; 0: bit-identical).
compare() {
  /usr/bin/python3 - "$dir/$1/metrics.jsonl" "$dir/$2/metrics.jsonl" "$3" "$4" <<'PY'
import json, sys
def steps(path):
    return {r["step"]: r for r in map(json.loads, open(path)) if "step" in r}
ref, run, first, tol = steps(sys.argv[1]), steps(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
worst = 0.0
for s in sorted(ref):
    if s < first: continue
    assert s in run, f"step {s} missing"
    assert run[s]["data_hash"] == ref[s]["data_hash"], f"step {s}: different data"
    d = abs(run[s]["loss"] - ref[s]["loss"]) / abs(ref[s]["loss"])
    assert d <= tol, f"step {s}: loss {run[s]['loss']!r} against {ref[s]['loss']!r}"
    worst = max(worst, d)
print(f"steps {first}-{max(ref)}: same data, worst loss difference {worst:.1e}")
PY
}
ckpt_format() { h5dump -d /meta/format "$1" | sed -n 's/.*(0): //p'; }

# Same layout: stop after step 4, resume from step 2, compare with a run that
# never stopped.
for layout in "tp2 2 --set parallel.tp=2" "pp2z 4 --set parallel.pp=2 --set optim.zero1=true" \
  "tp1 2"; do
  read -r name t args <<<"$layout"
  # shellcheck disable=SC2086
  train "$name" "$t" $args
  # shellcheck disable=SC2086
  train "$name-cut" "$t" $args --stop-at 4
  # shellcheck disable=SC2086
  train "$name-cut" "$t" $args --resume auto
  grep -q "resuming from .*step_00000002.h5" "$dir/$name-cut.log" || fail "$name: not resumed from step 2"
  [[ $(ckpt_format "$dir/$name-cut/checkpoints/step_00000002.h5") == 2 ]] || fail "$name: not format 2"
  out=$(compare "$name" "$name-cut" 3 0) || { echo "$out"; fail "$name: resume not bit-identical"; }
  echo "ok: $name resumed from step 2: $out (bit-identical)"
done

# Across layouts: 8 trainers (tp 2 x pp 2 x 2 data ranks, ZeRO-1) write.
big="--set parallel.tp=2 --set parallel.pp=2 --set optim.zero1=true"
# shellcheck disable=SC2086
train big 8 $big
ck=$dir/big/checkpoints/step_00000002.h5
[[ $(ckpt_format "$ck") == 2 ]] || fail "the 8-trainer checkpoint is not format 2"
/usr/bin/python3 "$root/scripts/data/read_checkpoint.py" "$ck" | grep -q "all good" ||
  fail "read_checkpoint.py rejects the 8-trainer checkpoint"
train to4 4 --set parallel.pp=2 --resume "$ck"
out=$(compare big to4 3 1e-5) || { echo "$out"; fail "8 -> 4 trainers (tp 1, pp 2)"; }
echo "ok: 8 trainers (tp 2, pp 2, ZeRO-1) -> 4 (tp 1, pp 2): $out"
train to6 6 --set parallel.tp=2 --resume "$ck"
out=$(compare big to6 3 1e-5) || { echo "$out"; fail "8 -> 6 trainers (tp 2, pp 1)"; }
echo "ok: 8 trainers (tp 2, pp 2, ZeRO-1) -> 6 (tp 2, pp 1): $out"

# Format 1, on request, resumes as before.
train f1 2 --set checkpoint.collective=false --stop-at 4
[[ $(ckpt_format "$dir/f1/checkpoints/step_00000002.h5") == 1 ]] || fail "collective: false is not format 1"
train f1 2 --set checkpoint.collective=false --resume auto
out=$(compare tp1 f1 3 0) || { echo "$out"; fail "format 1 resume"; }
echo "ok: format 1 (checkpoint.collective: false) written and resumed: $out"
