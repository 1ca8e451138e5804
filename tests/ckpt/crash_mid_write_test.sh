#!/usr/bin/env bash
# A trainer killed (SIGKILL) while it writes its part of a checkpoint:
#  - the job ends, the half-written NAME.h5.tmp is never taken for a checkpoint,
#    and the checkpoint before it still verifies;
#  - --resume auto takes that previous checkpoint, and every later loss and
#    batch is bit-identical to a run that never died;
#  - the drill is refused where it cannot act (not a trainer; trainer 0 gathering).
#   crash_mid_write_test.sh MESHLOOM MPIEXEC
set -u
meshloom=$1 mpiexec=$2
source "$(dirname "$0")/../common/testlib.sh"
prepare_docs docs '[a-c]*'
cat >"$dir/c.yaml" <<YAML
run: {timeout: 60, steps: 9}
cluster: {roles: {constructors: 1, loaders: 1}}
model: {vocab_size: 257, d_model: 64, n_layers: 2, n_heads: 4, n_kv_heads: 2, ffn_dim: 128}
plan: {capacity: 700}
data:
  seq_len: 1024
  tokens_per_step: 4096
  sources:
    - {name: docs, path: $dir/docs}
checkpoint: {every: 3, keep: 10}
YAML
train() {  # run-dir args...
  local run=$1; shift
  timeout 180 "$mpiexec" --oversubscribe --bind-to none -np 5 "$meshloom" train \
    -c "$dir/c.yaml" --set run.dir="$dir/$run" "$@" >>"$dir/$run.log" 2>&1
}

train full || { cat "$dir/full.log"; fail "uninterrupted run"; }
# Each element of the state is written once: the bytes the trainers report
# add up to the file's tensors, every checkpoint.
grep -q "checkpoints: 3 saved, each in" "$dir/full.log" || { cat "$dir/full.log"; fail "no checkpoint summary"; }
/usr/bin/python3 - "$dir/full/metrics.jsonl" "$dir/full/checkpoints/step_00000008.h5" <<'PY' ||
import h5py, json, sys
final = [json.loads(l) for l in open(sys.argv[1]) if '"final"' in l][-1]
wrote = [r["checkpoints"]["bytes"] for r in final["ranks"] if r["role"] == "trainer"]
f = h5py.File(sys.argv[2], "r")
state = sum(f[g][n].nbytes for g in ("model", "optim/m", "optim/v") for n in f[g])
assert sum(wrote) == 3 * state, (wrote, state)
assert max(wrote) - min(wrote) <= 0.1 * max(wrote), wrote
print(f"ok: the trainers wrote {[w // 3 for w in wrote]} bytes each per checkpoint, {state} in all")
PY
  fail "the bytes written do not add up to the checkpoint's state"

# Trainer 1 (rank 3) dies 20 KB into its part of step 5's checkpoint (its
# part is about 360 KB: it dies after its first datasets, mid-file).
train cut --set 'faults.inject=[{kind: crash_writing, rank: 3, step: 4, bytes: 20000}]' &&
  { cat "$dir/cut.log"; fail "the job survived a trainer's death"; }
grep -q "fault injected: trainer rank 3 dies writing the checkpoint of step 5, [0-9]* bytes in" \
  "$dir/cut.log" || { cat "$dir/cut.log"; fail "the drill did not fire"; }
ck=$dir/cut/checkpoints
[[ -f $ck/step_00000005.h5.tmp ]] || { ls -l "$ck"; fail "no half-written step_00000005.h5.tmp"; }
[[ -f $ck/step_00000005.h5 ]] && fail "a half-written checkpoint was renamed into place"
"$meshloom" inspect "$ck/step_00000002.h5" | grep -q "every checksum right" ||
  fail "the checkpoint before the death does not verify"
echo "ok: $(grep -o 'fault injected: .*' "$dir/cut.log" | head -1); step 2's checkpoint verifies"

train cut --resume auto || { cat "$dir/cut.log"; fail "resume after the death"; }
grep -q "resuming from .*step_00000002.h5" "$dir/cut.log" || { cat "$dir/cut.log"; fail "did not resume from step 2"; }
[[ -f $ck/step_00000005.h5.tmp ]] && fail "the torn .tmp was left behind"
diff <(metrics_table full | awk '$1 >= 3') <(metrics_table cut | tail -n 6) ||
  fail "losses or batches after the resume are not bit-identical"
echo "ok: --resume auto took step 2's checkpoint; steps 3-8 bit-identical (losses and data)"

refused() {
  timeout 60 "$mpiexec" --oversubscribe --bind-to none -np 5 "$meshloom" train -c "$dir/c.yaml" \
    --set run.dir="$dir/refused" "$@"
}
expect_error "faults.inject[0]: crash_writing acts on a trainer, and rank 1 is a loader" \
  refused --set 'faults.inject=[{kind: crash_writing, rank: 1}]'
expect_error "faults.inject[0]: crash_writing needs trainers that write their part" \
  refused --set 'faults.inject=[{kind: crash_writing, rank: 2}]' --set checkpoint.collective=false
echo "ok: the drill is refused on a loader and with gathered checkpoints"
echo "crash mid-write test passed"
