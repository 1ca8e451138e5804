#!/usr/bin/env bash
# A node lost mid-run on a real 3-node Slurm (slurm/local-cluster.sh
# --nodes 3): `kill-node mlnode3` cuts its link and kills every process on it
# (its slurmd and its 3 trainers) at step 7 or later. The multi-node template
# must find the node gone, mark it down, and resume from the newest
# checkpoint on the 2 nodes left with 3 trainers instead of 6; from that
# step on, batches must equal an uninterrupted 2-node run's and losses agree
# within fp32 tolerance. Prints the time from the loss to the new attempt's
# first step. Skips (77) where namespaces cannot be made (no root).
#   node_loss_test.sh MESHLOOM
set -u
meshloom=$(realpath "$1")
source "$(dirname "$0")/../common/testlib.sh"
cluster=$root/slurm/local-cluster.sh
export MESHLOOM_SLURM_DIR=$dir/slurm SLURM_CONF=$dir/slurm/etc/slurm.conf
if [[ $(id -u) != 0 ]] || ! ip netns add meshloom-probe 2>/dev/null; then
  echo "SKIP: network namespaces need root (ip netns add)"
  exit 77
fi
ip netns del meshloom-probe
ip link show mlbr0 >/dev/null 2>&1 && fail "a local multi-node cluster runs already: slurm/local-cluster.sh stop"
trap '"$cluster" stop >/dev/null 2>&1; kill $(jobs -p) 2>/dev/null; rm -rf "$dir"' EXIT
"$cluster" start --nodes 3 >/dev/null || fail "the 3-node cluster did not start"

prepare_docs docs '[a-c]*'
cat >"$dir/c.yaml" <<YAML
run: {timeout: 10, steps: 16}
cluster: {roles: {constructors: 1, loaders: 2}}
model: {vocab_size: 257, d_model: 128, n_layers: 2, n_heads: 4, n_kv_heads: 2, ffn_dim: 352}
optim: {lr: 6.0e-3, min_lr: 6.0e-4, warmup_steps: 5}
plan: {capacity: 512}
data:
  seq_len: 1024
  tokens_per_step: 2048
  sources: [{name: docs, path: $dir/docs}]
checkpoint: {every: 3}
YAML
# submit RUN NODES [sbatch options]: the multi-node template on NODES x 3 ranks, in the background.
submit() {
  local run=$1 nodes=$2
  shift 2
  (cd "$dir" && CONFIG=$dir/c.yaml MESHLOOM=$meshloom MPI_NET=10.231.0.0/24 EXTRA="--set run.dir=$dir/$run" \
    timeout 400 sbatch --wait --nodes="$nodes" --ntasks-per-node=3 --output="$dir/$run.out" "$@" \
    "$root/slurm/meshloom-multinode.sbatch" >/dev/null)
}

submit lost 3 &
drill=$!
for _ in $(seq 600); do
  [[ -f $dir/lost/metrics.jsonl ]] && grep -q '"step": *7[,}]' "$dir/lost/metrics.jsonl" && break
  sleep 0.2
done
grep -q '"step": *7[,}]' "$dir/lost/metrics.jsonl" 2>/dev/null || { cat "$dir/lost.out"; fail "the run did not reach step 7"; }
"$cluster" kill-node mlnode3 || fail "kill-node"
lost_at=$SECONDS
first=""
for _ in $(seq 1200); do
  if sed -n '/attempt 1: resuming/,$p' "$dir/lost.out" | grep -q '\] step '; then first=$((SECONDS - lost_at)); break; fi
  kill -0 "$drill" 2>/dev/null || break
  sleep 0.1
done
wait "$drill" || { cat "$dir/lost.out"; fail "the job did not end well after losing mlnode3"; }
cat "$dir/lost.out"
[[ -n $first ]] || fail "no step of a second attempt"
grep -q "node mlnode3 does not answer: marked down" "$dir/lost.out" || fail "mlnode3 not found lost"
grep -q "attempt 1: resuming on 2 nodes (mlnode1,mlnode2), 6 tasks" "$dir/lost.out" || fail "no resume on 2 nodes"
grep -q "trained steps .*-15" "$dir/lost.out" || fail "the run did not finish"
[[ $(sinfo -h -n mlnode3 -o %t) == down* ]] || fail "mlnode3 is '$(sinfo -h -n mlnode3 -o %t)', not down"
from=$(sed -n 's/.*resuming from .*step_0*\([0-9][0-9]*\)\.h5.*/\1/p' "$dir/lost.out" | tail -1)
[[ -n $from ]] || fail "no 'resuming from' line"
echo "ok: mlnode3 lost at step >= 7; resumed from the checkpoint of step $from on 2 nodes"
echo "node loss to the first step of the new attempt: $first s"

submit two 2 --exclude=mlnode3 || { cat "$dir/two.out"; fail "the uninterrupted 2-node run failed"; }
/usr/bin/python3 "$root/tests/train/same_losses.py" "$dir/lost/metrics.jsonl" "$dir/two/metrics.jsonl" \
  "$((from + 1))" 1e-4 || fail "the resumed run differs from an uninterrupted 2-node run"
echo "ok: from step $((from + 1)) on, the same batches as an uninterrupted 2-node run"
