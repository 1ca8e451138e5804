#!/usr/bin/env bash
# Pipeline parallelism end to end (parallel.pp), on real text:
#  - 20 steps of the quickstart's model shape with pp 2 on 8 ranks (3
#    pipelines of 2 stages) give the losses of pp 1 (3 trainers) within 1e-4
#    relative, on the same batches (data hashes equal);
#  - resume across pp: a checkpoint written at pp 2 resumes at pp 1 and one
#    written at pp 1 resumes at pp 2, each continuing with the same data and
#    losses within 1e-6 of the uninterrupted run;
#  - a hung or dead stage is caught: the stage waiting for it names the
#    stage, the pipeline and the rank, and the job ends with exit 3 within
#    run.timeout;
#  - a layout tp x pp does not divide is one message on every rank, exit 2.
# (Loss and gradients of single steps against one trainer: the pp cases of
# invariance_test.sh.)
#   pp_train_test.sh MESHLOOM MPIEXEC
set -u
meshloom=$1 mpiexec=$2
source "$(dirname "$0")/../common/testlib.sh"
# shellcheck source=tests/train/train_runs.sh
source "$(dirname "$0")/train_runs.sh"

train pp1 6
train pp2 8 --set parallel.pp=2 --set cluster.roles.loaders=1
grep -q "3 HDP ranks, each a pipeline of 2 stages" "$dir/pp2.log" || { cat "$dir/pp2.log"; fail "no PP layout line"; }
grep -q "micro-batches per pipeline" "$dir/pp2.log" || { cat "$dir/pp2.log"; fail "no micro-batch line"; }
same_losses pp1 pp2 0 1e-4 || fail "pp 2 does not train like pp 1"

# Resume across pp: stop after the checkpoint of step 9, go on at the other pp.
train cut21 8 --set parallel.pp=2 --set cluster.roles.loaders=1 --stop-at 12
train cut21 6 --resume auto
same_losses pp1 cut21 10 1e-6 || fail "pp 2 -> 1 resume"
train cut12 6 --stop-at 12
train cut12 8 --set parallel.pp=2 --set cluster.roles.loaders=1 --resume auto
same_losses pp2 cut12 10 1e-6 || fail "pp 1 -> 2 resume"

# A hung and a dead stage: trainer 1 (world rank 3: one constructor, one
# loader) is stage 1 of pipeline 0; stage 0 waits for its gradients and
# names it, and the job ends with exit 3 within run.timeout.
for kind in hang crash; do
  start=$SECONDS
  MESHLOOM_EXIT_FILE=$dir/$kind.exit timeout 60 "$mpiexec" --enable-recovery --oversubscribe \
    --bind-to none -np 8 \
    "$meshloom" train -c "$dir/c.yaml" --set parallel.pp=2 --set cluster.roles.loaders=1 \
    --set run.dir="$dir/$kind" --set run.timeout=4 \
    --set "faults.inject=[{kind: $kind, rank: 3, step: 2}]" >"$dir/$kind.txt" 2>&1
  rc=$?
  ((rc != 124)) || { cat "$dir/$kind.txt"; fail "$kind stage: the job did not end"; }
  rc=$(job_exit "$dir/$kind.exit")
  ((rc == 3)) || { cat "$dir/$kind.txt" "$dir/$kind.exit"; fail "$kind stage: exit code $rc, not 3"; }
  grep -q "stage 1 of pipeline 0 (world rank 3)" "$dir/$kind.txt" ||
    { cat "$dir/$kind.txt"; fail "$kind stage not named"; }
  echo "ok: $kind stage: job ended in $((SECONDS - start)) s: $(grep -o 'meshloom: .*stage 1 of pipeline 0.*' "$dir/$kind.txt" | head -1 | cut -c1-160)"
done

# tp 1 x pp 2 does not divide 5 trainers: one message naming parallel.pp, exit 2.
out=$(timeout 60 "$mpiexec" --oversubscribe --bind-to none -np 8 "$meshloom" train -c "$dir/c.yaml" \
  --set parallel.pp=2 --set run.dir="$dir/bad" 2>&1)
code=$?
[[ $code == 2 ]] || { echo "$out"; fail "bad layout exited $code, not 2"; }
[[ $(grep -c "parallel.tp x parallel.pp = 1 x 2 must divide the trainers" <<<"$out") == 1 ]] ||
  { echo "$out"; fail "bad layout: not one message naming parallel.pp"; }
echo "pp train test passed"
