#!/usr/bin/env bash
# A run folder reused by another run never loses checkpoints:
#  - a fresh run (and its dry run) refuses a folder holding an earlier run's
#    checkpoints, naming them and the ways out; nothing in it changes;
#  - --overwrite moves them aside and the new run keeps its own checkpoints
#    (step 0 included, which pruning used to delete at once);
#  - resuming from a checkpoint with later ones in the folder is refused;
#  - pruning leaves another run's checkpoints alone;
#  - a resume that changes run.steps warns that the learning rate moves.
#   run_folder_test.sh MESHLOOM MPIEXEC
set -u
meshloom=$1 mpiexec=$2
source "$(dirname "$0")/../common/testlib.sh"
prepare_docs docs '[a-b]*'
cat >"$dir/c.yaml" <<YAML
run: {timeout: 60, steps: 8, dir: $dir/run}
cluster: {roles: {constructors: 1, loaders: 1}}
model: {vocab_size: 257, d_model: 32, n_layers: 1, n_heads: 4, n_kv_heads: 2, ffn_dim: 64}
plan: {capacity: 512}
optim: {warmup_steps: 1}
data: {seq_len: 256, tokens_per_step: 512, sources: [{name: docs, path: $dir/docs}]}
checkpoint: {every: 1, keep: 3, full_every: 1}
YAML
# train LOG ARGS...: 3 ranks (constructor, loader, trainer); the exit code.
train() {
  local log=$1; shift
  timeout 120 "$mpiexec" --oversubscribe --bind-to none -np 3 "$meshloom" train -c "$dir/c.yaml" \
    "$@" >"$dir/$log.log" 2>&1
}
ck=$dir/run/checkpoints
steps() { ls "$1" | sed -n 's/^step_0*\([0-9][0-9]*\)\.h5$/\1/p' | sort -n | tr '\n' ' '; }

train a || { cat "$dir/a.log"; fail "the first run"; }
[[ $(steps "$ck") == "5 6 7 " ]] || fail "the first run left steps $(steps "$ck")"
cp "$dir/run/config.yaml" "$dir/a-config.yaml"

# Another model, fresh, in the same folder: refused on every rank with exit 2.
other=(--set model.d_model=64 --set model.ffn_dim=128)
start=$SECONDS
train b "${other[@]}"
rc=$?
((rc == 2)) || { cat "$dir/b.log"; fail "a fresh run over another run's checkpoints: exit $rc, not 2"; }
((SECONDS - start < 30)) || fail "the refusal took $((SECONDS - start)) s"
grep -q "$ck holds checkpoints of an earlier run (3 files, step_00000005.h5 to step_00000007.h5)" \
  "$dir/b.log" || { cat "$dir/b.log"; fail "the refusal does not name the checkpoints"; }
for way in "--resume auto" "another run.dir" "--overwrite"; do
  grep -q -- "$way" "$dir/b.log" || { cat "$dir/b.log"; fail "the refusal does not offer $way"; }
done
[[ $(steps "$ck") == "5 6 7 " ]] || fail "the refusal changed the checkpoints: $(steps "$ck")"
echo "ok: $(grep -o 'error: .*' "$dir/b.log" | head -1 | cut -c1-150 | sed "s|$dir/||")..."

# Its dry run says the same and leaves the folder's config.yaml as it was.
train dry "${other[@]}" --dry-run && fail "the dry run accepted the folder"
grep -q "holds checkpoints of an earlier run" "$dir/dry.log" || { cat "$dir/dry.log"; fail "dry run message"; }
cmp -s "$dir/run/config.yaml" "$dir/a-config.yaml" || fail "the dry run rewrote config.yaml"
train dry2 "${other[@]}" --set run.dir="$dir/elsewhere" --dry-run || { cat "$dir/dry2.log"; fail "dry run"; }
[[ ! -e $dir/elsewhere/config.yaml ]] || fail "a dry run wrote config.yaml"
echo "ok: the dry run refuses too and writes no config.yaml"

# --overwrite: the earlier checkpoints move aside; this run keeps its own.
train c "${other[@]}" --set run.steps=3 --overwrite || { cat "$dir/c.log"; fail "--overwrite"; }
[[ $(steps "$ck") == "0 1 2 " ]] || fail "--overwrite run left steps $(steps "$ck")"
aside=$(ls -d "$ck"/replaced-*)
[[ $(steps "$aside") == "5 6 7 " ]] || fail "moved aside: $(steps "$aside")"
grep -q "moved aside into $aside: 3 files, step_00000005.h5 to step_00000007.h5" "$dir/c.log" ||
  { cat "$dir/c.log"; fail "--overwrite does not say where the checkpoints went"; }
echo "ok: --overwrite moved steps 5-7 into $(basename "$aside"); the new run kept steps 0-2"

# Resuming from step 0 with steps 1-2 of this run in the folder is refused.
train d "${other[@]}" --set run.steps=3 --resume "$ck/step_00000000.h5"
rc=$?
((rc == 2)) || { cat "$dir/d.log"; fail "a resume below later checkpoints: exit $rc, not 2"; }
grep -q "holds checkpoints of later steps (step_00000001.h5 and step_00000002.h5): a run resuming at step 1" \
  "$dir/d.log" || { cat "$dir/d.log"; fail "the refusal of later steps"; }
echo "ok: a resume from step 0 below steps 1-2 refused"

# Pruning counts only this run's checkpoints: the first run's, put back,
# stay beside a run of the other model that resumes past them (at step 9).
mv "$aside"/step_*.h5 "$ck/"
rm "$ck"/step_0000000[0-2].h5
train e0 "${other[@]}" --set run.steps=9 --set run.dir="$dir/later" || { cat "$dir/e0.log"; fail "later"; }
train e "${other[@]}" --set run.steps=12 --resume "$dir/later/checkpoints/step_00000008.h5" ||
  { cat "$dir/e.log"; fail "resume beside another run's checkpoints"; }
[[ $(steps "$ck") == "5 6 7 9 10 11 " ]] || fail "pruning beside another run left $(steps "$ck")"
echo "ok: pruning kept the other run's steps 5-7 and this run's newest three"

# A resume that raises run.steps warns that the learning rate jumps; one
# that keeps it does not.
grep -q "changes the cosine schedule" "$dir/e.log" || { cat "$dir/e.log"; fail "no schedule warning"; }
grep -q "run.steps 9 -> 12 changes the cosine schedule mid-run: the learning rate at step 9" "$dir/e.log" ||
  { cat "$dir/e.log"; fail "the schedule warning does not give the step"; }
grep -o "run.steps 9 -> 12 changes.*" "$dir/e.log" | head -1
train f "${other[@]}" --set run.steps=12 --set run.dir="$dir/run2" --stop-at 4 || fail "run2"
train f2 "${other[@]}" --set run.steps=12 --set run.dir="$dir/run2" --resume auto || fail "run2 resume"
grep -q "cosine schedule" "$dir/f2.log" && { cat "$dir/f2.log"; fail "a warning without a change"; }
echo "ok: the schedule warning"
echo "run folder test passed"
