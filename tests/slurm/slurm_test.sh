#!/usr/bin/env bash
# A real Slurm on this machine (slurm/local-cluster.sh): submit a training job
# through slurm/submit.sh and the one-node template, wait for it, check its
# output; the first attempt stops at step 7 as a preempted job would; then
# requeue it and check that the second attempt resumed from its checkpoint
# and finished the run. Then the fault-tolerant template: a hung trainer,
# the watchdog's exit code 3 seen through mpirun --enable-recovery, requeue and
# resume. Stops the cluster if it started it.
#   slurm_test.sh MESHLOOM
set -u
meshloom=$(realpath "$1")
root=$(cd "$(dirname "$0")/../.." && pwd)
dir=$(mktemp -d)
fail() { echo "FAIL: $*"; [[ -n ${job:-} ]] && scontrol show job "$job" 2>/dev/null | head -20;
         [[ -f ${out:-} ]] && cat "$out"; cleanup; exit 1; }
started=0
cleanup() {
  [[ -n ${job:-} ]] && scancel "$job" 2>/dev/null
  ((started)) && "$root/slurm/local-cluster.sh" stop >/dev/null 2>&1
  rm -rf "$dir"
}
export MESHLOOM_SLURM_DIR=${MESHLOOM_SLURM_DIR:-/tmp/meshloom-slurm}
export SLURM_CONF=$MESHLOOM_SLURM_DIR/etc/slurm.conf
if ! "$root/slurm/local-cluster.sh" status >/dev/null 2>&1; then
  "$root/slurm/local-cluster.sh" start >/dev/null || fail "the local cluster did not start"
  started=1
fi

mkdir -p "$dir/docs"
cp /usr/share/doc/python3.11/html/_sources/library/[a-c]*.rst.txt "$dir/docs/" || fail "python3.11-doc missing"
"$meshloom" prepare --input "$dir/docs" --format text --tokenizer byte --out "$dir/docs" >/dev/null || fail prepare
cat >"$dir/c.yaml" <<YAML
run: {steps: 12, timeout: 60, dir: $dir/run}
cluster: {roles: {constructors: 1, loaders: 1}}
model: {vocab_size: 257, d_model: 32, n_layers: 1, n_heads: 4, n_kv_heads: 2, ffn_dim: 64}
data:
  seq_len: 512
  tokens_per_step: 2048
  sources: [{name: docs, path: $dir/docs}]
checkpoint: {every: 3}
YAML

# await_restarted POLLS RELEASE: waits (0.5 s a poll) until $job has completed
# after a restart; sets $state. RELEASE > 0: after that many polls pending
# after its requeue, release the job (Slurm holds a requeued job for about
# two minutes), but not at once: slurmd refuses to launch a batch job it
# killed for the requeue a moment ago ("already killed") and the job fails.
await_restarted() {
  local info restarts pending=0
  state=""
  for _ in $(seq "$1"); do
    info=$(scontrol show job "$job" 2>/dev/null)
    state=$(grep -o 'JobState=[A-Z_]*' <<<"$info" | cut -d= -f2)
    restarts=$(grep -o 'Restarts=[0-9]*' <<<"$info" | cut -d= -f2)
    [[ $state == COMPLETED && ${restarts:-0} -ge 1 ]] && return 0
    [[ $state == FAILED || $state == CANCELLED ]] && return 1
    if (($2 > 0)) && [[ $state == PENDING && ${restarts:-0} -ge 1 ]]; then
      ((++pending == $2)) && scontrol update jobid="$job" starttime=now 2>/dev/null
    fi
    sleep 0.5
  done
  state="$state (timed out)"
  return 1
}

out=$dir/job.out
job=$(cd "$dir" && MESHLOOM="$meshloom" EXTRA_FIRST="--stop-at 7" \
      "$root/slurm/submit.sh" "$dir/c.yaml" 2 --parsable --wait --output="$out") ||
  fail "sbatch --wait: the first attempt failed"
job=${job%%;*}
grep -q "attempt 0 on .*: 4 ranks" "$out" || fail "the job did not run 4 ranks"
grep -q "trained steps 0-6" "$out" || fail "the first attempt did not train steps 0-6"
[[ -f $dir/run/checkpoints/step_00000005.h5 ]] || fail "no checkpoint at step 5"
echo "ok: job $job, attempt 0: $(grep -o 'trained steps 0-6.*' "$out")"

scontrol requeue "$job" || fail "scontrol requeue $job"
# Slurm holds a requeued job for about two minutes (BeginTime); release it now.
for _ in $(seq 20); do
  scontrol update jobid="$job" starttime=now 2>/dev/null && break
  sleep 0.2
done
await_restarted 240 0 || fail "second attempt: $state"
grep -q "attempt 1 on" "$out" || fail "no second attempt in the output"
grep -q "resuming from .*step_00000005.h5" "$out" || fail "the second attempt did not resume from step 5"
grep -q "trained steps 6-11" "$out" || fail "the second attempt did not finish steps 6-11"
echo "ok: requeued, attempt 1: $(grep -o 'resuming from .*' "$out" | head -1 | sed "s|$dir/||")"

# The fault-tolerant template (mpirun --enable-recovery, whose own exit code is
# always 0): a trainer hangs at step 4 in the first attempt, the watchdog ends
# it with code 3, the template reads the ranks' codes, requeues, and the second
# attempt resumes from the step-2 checkpoint and finishes.
rm -rf "$dir/run"
out=$dir/ft.out
job=$(cd "$dir" && MESHLOOM="$meshloom" \
      EXTRA_FIRST="--set run.timeout=4 --set faults.inject=[{\"kind\":\"hang\",\"rank\":3,\"step\":4}]" \
      "$root/slurm/submit.sh" "$dir/c.yaml" 2 "$root/slurm/meshloom-fault-tolerant.sbatch" \
      --parsable --output="$out") || fail "sbatch of the fault-tolerant template"
job=${job%%;*}
await_restarted 360 10 || fail "fault-tolerant job: $state"
grep -q "watchdog: rank .* has waited" "$out" || fail "attempt 0: no watchdog message"
grep -q "attempt 0 ended with 3" "$out" || fail "attempt 0 did not end with code 3"
grep -q "resuming from .*step_00000002.h5" "$out" || fail "attempt 1 did not resume from step 2"
grep -q "attempt 1 ended with 0" "$out" || fail "attempt 1 did not end with 0"
echo "ok: fault-tolerant template: watchdog exit 3, requeued, resumed from step 2, finished"
job=""
cleanup
echo "slurm test passed"
