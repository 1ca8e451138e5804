#!/usr/bin/env bash
# Tensor parallelism end to end (parallel.tp), on real text:
#  - 20 steps of the quickstart's model shape with tp 2 on 8 ranks (3 HDP
#    ranks of 2 trainers) give the losses of tp 1 (5 trainers) within 1e-4
#    relative, on the same batches (data hashes equal), and with sequence
#    parallelism those of tp 2 within 1e-5;
#  - resume across tp: a checkpoint written at tp 2 resumes at tp 1 and one
#    written at tp 1 resumes at tp 2, each continuing with the same data and
#    losses within 1e-6 of the uninterrupted run;
#  - a layout tp does not divide is one message on every rank and exit 2.
#   tp_train_test.sh MESHLOOM MPIEXEC
set -u
meshloom=$1 mpiexec=$2
source "$(dirname "$0")/../common/testlib.sh"
# shellcheck source=tests/train/train_runs.sh
source "$(dirname "$0")/train_runs.sh"

train tp1 8
train tp2 8 --set parallel.tp=2 --set cluster.roles.loaders=1
grep -q "3 HDP ranks of 2 trainers" "$dir/tp2.log" || { cat "$dir/tp2.log"; fail "no TP layout line"; }
same_losses tp1 tp2 0 1e-4 || fail "tp 2 does not train like tp 1"
# Sequence parallelism: the same sums in forward, the norm gains' gradients
# summed in another order; the losses follow tp 2's closely.
train tp2_sp 8 --set parallel.tp=2 --set parallel.sequence_parallel=true --set cluster.roles.loaders=1
same_losses tp2 tp2_sp 0 1e-5 || fail "tp 2 with sequence parallelism does not train like tp 2"

# Resume across tp: stop after the checkpoint of step 9, go on at the other tp.
train cut21 8 --set parallel.tp=2 --set cluster.roles.loaders=1 --stop-at 12
train cut21 8 --resume auto
same_losses tp1 cut21 10 1e-6 || fail "tp 2 -> 1 resume"
train cut12 8 --stop-at 12
train cut12 8 --set parallel.tp=2 --set cluster.roles.loaders=1 --resume auto
same_losses tp2 cut12 10 1e-6 || fail "tp 1 -> 2 resume"

# tp 2 does not divide 5 trainers: one message naming parallel.tp, exit 2.
out=$(timeout 60 "$mpiexec" --oversubscribe --bind-to none -np 8 "$meshloom" train -c "$dir/c.yaml" \
  --set parallel.tp=2 --set run.dir="$dir/bad" 2>&1)
code=$?
[[ $code == 2 ]] || { echo "$out"; fail "bad layout exited $code, not 2"; }
[[ $(grep -c "parallel.tp 2 must divide the trainers" <<<"$out") == 1 ]] ||
  { echo "$out"; fail "bad layout: not one message naming parallel.tp"; }
echo "tp train test passed"
