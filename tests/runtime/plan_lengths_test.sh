#!/usr/bin/env bash
# `meshloom plan --lengths` and `meshloom simulate --lengths` as a user runs
# them: a TSV, a plain file and a prepared dataset's .idx are length tables
# (lib/data/length_table.hpp); for simulate anything that is not a file is a
# distribution name. Bad tables and names exit 2 with one error line.
#   plan_lengths_test.sh MESHLOOM
set -u
meshloom=$1
source "$(dirname "$0")/../common/testlib.sh"
prepare_docs docs 'a*'
printf 'name\tgpt2_tokens\tutf8_bytes\na.c\t9000\t1\nempty.c\t0\t0\nb.h\t3000\t1\n' >"$dir/l.tsv"
printf '4096\n# a comment\n12000\n' >"$dir/l.txt"
printf 'name\tgpt2_tokens\nx.c\tabc\n' >"$dir/bad.tsv"


plan() { "$meshloom" plan --trainers 8 --capacity 4K --context 16K "$@" 2>&1; }
for f in l.tsv l.txt docs.idx; do
  out=$(plan --lengths "$dir/$f") || fail "plan --lengths $f: $out"
  grep -q 'plan valid' <<<"$out" || fail "plan --lengths $f: no 'plan valid' in: $out"
done
out=$(plan --lengths "$dir/l.tsv" --json "$dir/p.json") || fail "plan --json: $out"
grep -q '"length": 9000' "$dir/p.json" || fail "the TSV's 9000 is not in the plan: $(cat "$dir/p.json")"
grep -q '"length": 0' "$dir/p.json" && fail "the empty document was planned"

sim() { "$meshloom" simulate --trainers 4 --capacity 4K --context 16K --batch 64K "$@" 2>&1; }
for f in l.tsv docs.idx; do
  out=$(sim --lengths "$dir/$f") || fail "simulate --lengths $f: $out"
  grep -q "; $f lengths" <<<"$out" || fail "simulate --lengths $f: not drawn from $f: $out"
done
out=$(sim --lengths github) || fail "simulate --lengths github: $out"
grep -q '; github lengths' <<<"$out" || fail "simulate --lengths github: $out"

# --pp: pipelines of 2 stages, PP-Balance against round-robin, per pipeline.
out=$("$meshloom" plan --lengths "$dir/docs.idx" --trainers 4 --capacity 16K --context 16K --pp 2 2>&1) ||
  fail "plan --pp 2: $out"
grep -q '^4 pipelines of 2 stages' <<<"$out" || fail "plan --pp 2: no pipeline header in: $out"
(($(grep -cE '^ +[0-3] \| +[0-9]+ ' <<<"$out") == 4)) || fail "plan --pp 2: not 4 pipeline rows: $out"
grep -qE '^step \(slowest pipeline\): pp-balance .*, round-robin .*x\)$' <<<"$out" ||
  fail "plan --pp 2: no step line in: $out"
# --png: the schedule's ops as CSV (every pipeline and stage, each micro-batch
# once forward and once backward) and its chart.
"$meshloom" plan --lengths "$dir/docs.idx" --trainers 4 --capacity 16K --context 16K --pp 2 \
  --png "$dir/s.png" >/dev/null 2>&1 || fail "plan --pp 2 --png failed"
[[ -s $dir/s.png ]] || fail "plan --pp 2 --png: no chart"
/usr/bin/python3 - "$dir/s.schedule.csv" <<'PY' || fail "plan --pp 2 --png: bad schedule CSV"
import csv, sys, collections
ops = list(csv.DictReader(open(sys.argv[1])))
count = collections.Counter((r["scheduler"], r["pipeline"], r["stage"], r["micro_batch"], r["op"]) for r in ops)
assert set(count.values()) == {1}, "an op twice"
for (sched, p, s, mb, op) in count:
    assert (sched, p, s, mb, "B" if op == "F" else "F") in count, "F without B"
    assert float(next(r["start"] for r in ops if (r["scheduler"], r["pipeline"], r["stage"], r["micro_batch"], r["op"]) == (sched, p, s, mb, op))) >= 0
assert {r["stage"] for r in ops} == {"0", "1"} and {r["pipeline"] for r in ops} <= {"0", "1", "2", "3"}
PY
expect_error "at most --capacity (4096) tokens" "$meshloom" plan --lengths "$dir/l.tsv" --trainers 8 --capacity 4K --pp 2

# Both inputs are named where a user looks first: the command list and the
# command's own help.
for help in "$("$meshloom" --help | grep '^  plan ')" "$("$meshloom" plan --help | head -1)"; do
  for input in --config --lengths; do
    grep -qF -- "$input" <<<"$help" || fail "plan's description does not name $input: $help"
  done
done

expect_error "bad.tsv:2: expected a token count, got 'abc'" "$meshloom" plan --lengths "$dir/bad.tsv" --trainers 2
expect_error "bad.tsv:2" "$meshloom" simulate --lengths "$dir/bad.tsv" --trainers 4
expect_error "did you mean 'byted'" "$meshloom" simulate --lengths bytde --trainers 4
expect_error "cannot read lengths file" "$meshloom" plan --lengths "$dir/missing.tsv" --trainers 2
echo "ok"
