#!/usr/bin/env bash
# A real Slurm on this machine (slurm/local-cluster.sh): submit a training job
# through slurm/submit.sh and the one-node template, wait for it, check its
# output; the first attempt stops at step 7 as a preempted job would; then
# requeue it and check that the second attempt resumed from its checkpoint
# and finished the run. The config's paths are relative (to its folder) and
# the job is submitted from another folder; its log lands in run.dir under a
# name with the submit time. By hand, the template moves an older job's log
# of the same number aside. Then the fault-tolerant template: a hung trainer,
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
# Relative paths: against the config's folder ($dir), not the submit folder.
cat >"$dir/c.yaml" <<YAML
run: {steps: 12, timeout: 60, dir: run}
cluster: {roles: {constructors: 1, loaders: 1}}
model: {vocab_size: 257, d_model: 32, n_layers: 1, n_heads: 4, n_kv_heads: 2, ffn_dim: 64}
data:
  seq_len: 512
  tokens_per_step: 2048
  sources: [{name: docs, path: docs}]
checkpoint: {every: 3}
YAML
mkdir -p "$dir/elsewhere"

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

job=$(cd "$dir/elsewhere" && MESHLOOM="$meshloom" EXTRA_FIRST="--stop-at 7" \
      "$root/slurm/submit.sh" "$dir/c.yaml" 2 --parsable --wait) ||
  fail "sbatch --wait: the first attempt failed"
job=${job%%;*}
out=$(ls "$dir"/run/slurm-2*-"$job".out) || fail "no log run/slurm-<time>-$job.out"
[[ -z $(ls -A "$dir/elsewhere") ]] || fail "the job wrote into the submit folder: $(ls "$dir/elsewhere")"
echo "ok: relative paths from the config's folder; log $(basename "$out") in run.dir"
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

# By hand, the template's own log name meshloom-<job>.out: a log left there by
# an older job of the same number (a new cluster numbers from 1 again) is
# moved aside, not appended to. The finished run has nothing left to train.
job=$(cd "$dir/elsewhere" && CONFIG="$dir/c.yaml" MESHLOOM="$meshloom" \
      sbatch --parsable --hold -n 4 --export=ALL "$root/slurm/meshloom-1node.sbatch") ||
  fail "sbatch --hold of the template"
job=${job%%;*}
out=$dir/elsewhere/meshloom-$job.out
echo "a line of an older job $job" >"$out"
scontrol release "$job" || fail "scontrol release $job"
for _ in $(seq 120); do
  state=$(scontrol show job "$job" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2)
  [[ $state == COMPLETED || $state == FAILED || $state == CANCELLED ]] && break
  sleep 0.5
done
[[ $state == COMPLETED ]] || fail "the job by hand: $state"
grep -q "older job" "$out" && fail "the new job appended to an older job's log"
grep -q "job $job attempt 0" "$out" || fail "the job's own lines are not in $out"
grep -q "older job" "$out".older-* || fail "the older job's log was not kept aside"
echo "ok: by hand, an older meshloom-$job.out moved aside to $(basename "$out".older-*)"

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
