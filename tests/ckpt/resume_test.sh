#!/usr/bin/env bash
# Checkpoints and resume, end to end on real text:
#  - stop at a step, resume: every later loss and batch is bit-identical to a
#    run that never stopped (same layout);
#  - elastic resume from 4 trainers to 2 and 3: identical data, losses within
#    fp32 tolerance;
#  - a torn checkpoint (truncated, flipped byte, missing dataset) is skipped
#    with a clear message and the previous good one is used;
#  - a job that keeps failing from the same checkpoint stops after
#    checkpoint.max_restarts tries with a clear message;
#  - a finished run resumed finds nothing to train; a checkpoint of another
#    model or seed is refused.
#   resume_test.sh MESHLOOM MPIEXEC
set -u
meshloom=$1 mpiexec=$2
source "$(dirname "$0")/../common/testlib.sh"
prepare_docs docs '[a-c]*'
/usr/bin/python3 "$root/scripts/data/corpora.py" fortunes "$dir/fortunes.jsonl" >/dev/null
cat >"$dir/c.yaml" <<YAML
run: {timeout: 60, steps: 14}
cluster: {roles: {constructors: 1, loaders: 1}}
model: {vocab_size: 257, d_model: 32, n_layers: 2, n_heads: 4, n_kv_heads: 2, ffn_dim: 64}
plan: {capacity: 700}
data:
  seq_len: 1024
  tokens_per_step: 4096
  sources:
    - {name: docs, path: $dir/docs}
    - {name: fortunes, path: $dir/fortunes.jsonl, format: jsonl, tokenizer: byte}
  schedule:
    - {step: 0, weights: {docs: 3, fortunes: 1}}
    - {step: 13, weights: {docs: 1, fortunes: 3}}
checkpoint: {every: 3, keep: 10, full_every: 2}
YAML
train() {  # run-dir trainers args...
  local run=$1 t=$2; shift 2
  timeout 180 "$mpiexec" --oversubscribe --bind-to none -np $((2 + t)) "$meshloom" train \
    -c "$dir/c.yaml" --set run.dir="$dir/$run" "$@" >>"$dir/$run.log" 2>&1
}

train full 2 || { cat "$dir/full.log"; fail "uninterrupted run"; }
train cut 2 --stop-at 7 || { cat "$dir/cut.log"; fail "run stopped at 7"; }
train cut 2 --resume auto || { cat "$dir/cut.log"; fail "resumed run"; }
grep -q "resuming from .*step_00000005.h5" "$dir/cut.log" || { cat "$dir/cut.log"; fail "did not resume from step 5"; }
# Steps 6.. of the resumed run (the last lines) equal the uninterrupted run's.
diff <(metrics_table full | awk '$1 >= 6') <(metrics_table cut | tail -n 8) ||
  fail "resumed losses or batches are not bit-identical"
echo "ok: stop at 7, resume from step 5: steps 6-13 bit-identical (losses and data)"

# A finished run requeued: --resume auto finds nothing to train and exits 0 at
# once (it used to wait for a batch until run.timeout).
start=$SECONDS
out=$(timeout 60 "$mpiexec" --oversubscribe --bind-to none -np 4 "$meshloom" train -c "$dir/c.yaml" \
  --set run.dir="$dir/cut" --resume auto 2>&1) || { echo "$out"; fail "resuming a finished run failed"; }
grep -q "nothing to train: .*step_00000013.h5 ends step 13" <<<"$out" || { echo "$out"; fail "no 'nothing to train'"; }
((SECONDS - start < 30)) || fail "resuming a finished run took $((SECONDS - start)) s"
echo "ok: a finished run resumed: $(grep -o 'nothing to train.*' <<<"$out" | sed "s|$dir/||")"

# A checkpoint of another model or seed is refused, naming the keys; other
# changes are listed.
ck5=$dir/cut/checkpoints/step_00000005.h5
out=$(timeout 60 "$mpiexec" --oversubscribe --bind-to none -np 4 "$meshloom" train -c "$dir/c.yaml" \
  --set run.dir="$dir/other" --resume "$ck5" --set model.n_heads=2 --set run.seed=9 2>&1)
rc=$?
((rc == 2)) || { echo "$out"; fail "a checkpoint of another model: exit $rc, not 2"; }
grep -q "another config: run.seed 1234 -> 9, model.n_heads 4 -> 2\." <<<"$out" ||
  { echo "$out"; fail "the refusal does not name run.seed and model.n_heads"; }
train other 2 --resume "$ck5" --set optim.lr=1e-3 --stop-at 7 || { cat "$dir/other.log"; fail "resume with another lr"; }
grep -q "resuming with keys changed since .*optim.lr 0.003 -> 0.001" "$dir/other.log" ||
  { cat "$dir/other.log"; fail "the changed learning rate is not listed"; }
echo "ok: another model or seed refused; a changed learning rate listed"

# Elastic: 4 trainers, stop, resume on 2 and on 3.
train el4 4 || { cat "$dir/el4.log"; fail "4-trainer run"; }
for t in 2 3; do
  train "el$t-cut" 4 --stop-at 7 || fail "4-trainer run stopped at 7"
  train "el$t-cut" "$t" --resume auto || { cat "$dir/el$t-cut.log"; fail "elastic resume on $t"; }
  /usr/bin/python3 - "$dir/el4/metrics.jsonl" "$dir/el$t-cut/metrics.jsonl" "$t" <<'PY' || fail "elastic resume on $t trainers"
import json, sys
ref = {}
for l in open(sys.argv[1]):
    r = json.loads(l)
    if "step" in r: ref[r["step"]] = r
rows = [r for r in map(json.loads, open(sys.argv[2])) if "step" in r][-8:]
worst = 0.0
for r in rows:
    a = ref[r["step"]]
    assert r["data_hash"] == a["data_hash"], f"step {r['step']}: different data"
    worst = max(worst, abs(r["loss"] - a["loss"]) / abs(a["loss"]))
print(f"ok: 4 -> {sys.argv[3]} trainers: same data on steps 6-13, worst loss difference {worst:.1e}")
assert worst < 1e-4, "losses differ beyond fp32 tolerance"
PY
done

# Torn checkpoints: the newest is truncated, the next has a flipped byte, the
# next lacks a dataset: --resume auto must skip all three and use the fourth.
ck=$dir/full/checkpoints
ls "$ck"/step_*.h5 >/dev/null || fail "no checkpoints written"
newest=$(ls "$ck"/step_*.h5 | sort | tail -1)
truncate -s 5000 "$newest"
second=$(ls "$ck"/step_*.h5 | sort | tail -2 | head -1)
# Flip one byte inside the stored embedding, in the raw file.
offset=$(/usr/bin/python3 -c 'import h5py,sys; print(h5py.File(sys.argv[1],"r")["model/embed"].id.get_offset())' "$second")
byte=$(dd if="$second" bs=1 skip=$((offset + 101)) count=1 status=none | od -An -tu1 | tr -d ' ')
printf "$(printf '\\%03o' $(((byte ^ 0x10) & 0xff)))" | dd of="$second" bs=1 seek=$((offset + 101)) conv=notrunc status=none
third=$(ls "$ck"/step_*.h5 | sort | tail -3 | head -1)
fourth=$(ls "$ck"/step_*.h5 | sort | tail -4 | head -1)
/usr/bin/python3 -c 'import h5py,sys; f=h5py.File(sys.argv[1],"r+"); del f["optim/m/layers.0.wq"]' "$third"
"$meshloom" inspect "$ck/step_00000002.h5" | grep -q "every checksum right" || fail "inspect of a good checkpoint"
"$meshloom" inspect "$newest" >"$dir/inspect.txt" 2>&1 && fail "inspect accepted a torn checkpoint"
grep -q "^meshloom: error: .*step_" "$dir/inspect.txt" || { cat "$dir/inspect.txt"; fail "inspect message"; }
# The documented layout, read independently: h5py (checksums recomputed) and h5dump.
/usr/bin/python3 "$root/scripts/data/read_checkpoint.py" "$ck/step_00000002.h5" | grep -q "all good" ||
  fail "read_checkpoint.py rejects a good checkpoint"
/usr/bin/python3 "$root/scripts/data/read_checkpoint.py" "$second" >/dev/null && fail "read_checkpoint.py accepted a flipped byte"
h5dump -d /meta/step "$ck/step_00000002.h5" | grep -q "(0): 2" || fail "h5dump cannot read /meta/step"
echo "ok: meshloom inspect verifies and refuses: $(cat "$dir/inspect.txt" | cut -c1-100)"
train full 2 --resume auto || { cat "$dir/full.log"; fail "resume past torn checkpoints"; }
for f in "$newest" "$second" "$third"; do
  grep -q "skipping a bad checkpoint: $f" "$dir/full.log" || { cat "$dir/full.log"; fail "$f not reported"; }
done
grep "skipping a bad checkpoint" "$dir/full.log"
grep -q "resuming from $fourth" "$dir/full.log" || fail "did not fall back to $fourth"
echo "ok: three torn checkpoints skipped with a message, resumed from $(basename "$fourth")"

# A job that fails again and again from the same checkpoint gives up.
cat "$dir/c.yaml" >"$dir/c2.yaml"
for i in 1 2 3; do
  train loop 2 --stop-at 4 --set checkpoint.max_restarts=2 $([[ $i -gt 1 ]] && echo --resume auto) \
    >/dev/null 2>&1
done
rm -f "$dir"/loop/checkpoints/step_0000000[5-9].h5
out=$(timeout 60 "$mpiexec" --oversubscribe --bind-to none -np 4 "$meshloom" train -c "$dir/c.yaml" \
  --set run.dir="$dir/loop" --set checkpoint.max_restarts=2 --resume auto --stop-at 4 2>&1)
rc=$?
((rc != 0)) || { echo "$out"; fail "a third resume from the same checkpoint was accepted"; }
echo "$out" | grep -q "resumed 2 times from .*step_00000002.h5 without getting past it" ||
  { echo "$out"; fail "no clear message for the restart loop"; }
echo "ok: $(echo "$out" | grep '^meshloom: error')"
echo "resume test passed"
