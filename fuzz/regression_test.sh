#!/bin/sh
# regression_test.sh REPLAYER INPUT EXPECTED: replays one fuzz regression and
# passes if it still reaches the check it was filed for: no finding, and the
# harness's Error contains EXPECTED ("-": the input decodes with no error).
# The expectations are in fuzz/regressions/TARGET.checks.
set -u
out=$(MESHLOOM_FUZZ_SHOW_ERRORS=1 "$1" "$2" 2>&1)
rc=$?
printf '%s\n' "$out"
if [ "$rc" -ne 0 ]; then
  echo "FAIL: the replay exited $rc"
  exit 1
fi
errors=$(printf '%s\n' "$out" | grep '^fuzz: expected error: ')
if [ "$3" = "-" ]; then
  if [ -n "$errors" ]; then
    echo "FAIL: $2 should decode with no error"
    exit 1
  fi
elif ! printf '%s\n' "$errors" | grep -qF -- "$3"; then
  echo "FAIL: $2 no longer reaches its check; its error should contain: $3"
  exit 1
fi
echo "reaches its check: $3"
