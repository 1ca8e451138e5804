#!/usr/bin/env bash
# Progress output fits where it goes. Under mpirun every rank's stdout is a
# pseudo-terminal even when mpirun writes to a file (a Slurm log): there the
# progress must come as plain lines, with no carriage returns or escape codes.
# MESHLOOM_PROGRESS=redraw|lines overrides; a bad value is one clear error.
#   progress_test.sh MESHLOOM MPIEXEC
set -u
meshloom=$1 mpiexec=$2
source "$(dirname "$0")/../common/testlib.sh"
prepare_docs docs 'a*'
cat >"$dir/c.yaml" <<YAML
cluster: {roles: {constructors: 1, loaders: 1}}
data: {seq_len: 1024, tokens_per_step: 4096, sources: [{name: docs, path: $dir/docs}]}
YAML
data() { timeout 60 "$mpiexec" -np 4 "$meshloom" data -c "$dir/c.yaml" --steps 20 >"$dir/out.txt" 2>&1; }

data || { cat "$dir/out.txt"; fail "data run failed"; }
grep -q $'[\r\033]' "$dir/out.txt" && fail "carriage returns or escape codes in a log file: $(cat -A "$dir/out.txt")"
grep -qx '\[data\] step 20/20  .* done' "$dir/out.txt" || fail "no final progress line: $(cat "$dir/out.txt")"

MESHLOOM_PROGRESS=redraw data || fail "data run with MESHLOOM_PROGRESS=redraw failed"
grep -q $'\r\033\\[K\\[data\\] step 20/20' "$dir/out.txt" || fail "MESHLOOM_PROGRESS=redraw did not redraw: $(cat -A "$dir/out.txt")"

MESHLOOM_PROGRESS=sometimes data && fail "MESHLOOM_PROGRESS=sometimes was accepted"
grep -q 'MESHLOOM_PROGRESS=sometimes: expected redraw or lines' "$dir/out.txt" ||
  fail "no clear message for a bad MESHLOOM_PROGRESS: $(cat "$dir/out.txt")"

# prepare, outside MPI, into a file: lines, ending with the last one.
"$meshloom" prepare --input "$dir/docs" --format text --tokenizer byte --out "$dir/again" 2>"$dir/err.txt" >/dev/null ||
  fail "prepare failed: $(cat "$dir/err.txt")"
grep -q $'[\r\033]' "$dir/err.txt" && fail "carriage returns in prepare's log: $(cat -A "$dir/err.txt")"
grep -q 'docs, .* tokens, done$' "$dir/err.txt" || fail "no final progress line from prepare: $(cat "$dir/err.txt")"
echo "ok"
