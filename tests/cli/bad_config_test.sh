#!/usr/bin/env bash
# One bad-config case: meshloom must refuse it on every rank with one clear
# message and a non-zero exit, within seconds.
#   bad_config_test.sh MESHLOOM MPIEXEC CASE.yaml NP
# The case file's header says what to expect:
#   # expect: TEXT     the error message must contain TEXT
#   # args: ARGS       extra arguments (e.g. --set a.b=c)
#   # config: PATH     use PATH as the config instead of the case file
set -u
meshloom=$1 mpiexec=$2 case=$3 np=$4
expect=$(sed -n 's/^# expect: //p' "$case")
args=$(sed -n 's/^# args: //p' "$case")
config=$(sed -n 's/^# config: //p' "$case")
[[ -n $config ]] || config=$case
[[ -n $expect ]] || { echo "case $case has no '# expect:' line"; exit 1; }
out=$(mktemp)
start=$EPOCHREALTIME
# shellcheck disable=SC2086
timeout 30 "$mpiexec" --oversubscribe --bind-to none -np "$np" \
  "$meshloom" train --config "$config" $args --dry-run >"$out" 2>&1
rc=$?
elapsed=$(awk -v a="$start" -v b="$EPOCHREALTIME" "BEGIN{printf \"%.2f\", b-a}")
fail() { echo "FAIL ($case, np=$np): $*"; echo "--- output ---"; cat "$out"; rm -f "$out"; exit 1; }
((rc == 124)) && fail "timed out: a hang"
((rc != 0)) || fail "exit code 0 for a bad config"
grep -qF -- "$expect" "$out" || fail "message does not contain: $expect"
n=$(grep -c '^meshloom: error' "$out")
((n == 1)) || fail "expected exactly one error message, got $n"
grep -q 'terminate called\|Segmentation\|Aborted' "$out" && fail "crashed instead of a clean error"
echo "ok: $(basename "$case") np=$np rc=$rc in ${elapsed}s: $(grep '^meshloom: error' "$out")"
rm -f "$out"
