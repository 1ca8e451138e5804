#!/usr/bin/env bash
# `meshloom prepare` and `meshloom inspect` as a user runs them: good inputs
# succeed with a report; bad inputs and corrupt files exit 2 with exactly one
# "meshloom: error" line naming the file, and never crash.
#   prepare_cli_test.sh MESHLOOM
set -u
meshloom=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
n=0
fail() { echo "FAIL: $*"; echo "--- output ---"; cat "$dir/out"; exit 1; }

# expect_error TEXT ARGS...: exit 2, one error line containing TEXT.
expect_error() {
  local text=$1
  shift
  timeout 30 "$meshloom" "$@" >"$dir/out" 2>&1
  local rc=$?
  ((rc == 2)) || fail "meshloom $* exited $rc, expected 2"
  grep -qF -- "$text" "$dir/out" || fail "meshloom $*: message does not contain: $text"
  (($(grep -c '^meshloom: error' "$dir/out") == 1)) || fail "meshloom $*: not exactly one error line"
  grep -q 'terminate called\|Segmentation\|Aborted' "$dir/out" && fail "meshloom $*: crashed"
  n=$((n + 1))
}
expect_ok() {
  timeout 60 "$meshloom" "$@" >"$dir/out" 2>&1 || fail "meshloom $* exited $?"
  n=$((n + 1))
}

# Inputs: a text folder, JSON Lines with problems, a tar.gz made by tar(1).
mkdir -p "$dir/docs/sub"
printf 'alpha\n' >"$dir/docs/a.txt"
printf 'beta \xff\n' >"$dir/docs/sub/b.txt"
: >"$dir/docs/sub/empty.txt"
printf '{"text": "one"}\n{"text": oops}\n{"text": "three"}\n' >"$dir/data.jsonl"
tar --sort=name -czf "$dir/docs.tar.gz" -C "$dir" docs
printf 'plain text\n' >"$dir/notes.txt"

# Missing, unreadable-as-format and empty inputs.
expect_error "/nonexistent/corpus" prepare --input /nonexistent/corpus --tokenizer byte --out "$dir/x"
[[ -e $dir/x.bin || -e $dir/x.bin.tmp ]] && fail "output left behind after a bad input"
expect_error "$dir/notes.txt: not a readable tar archive" \
  prepare --input "$dir/notes.txt" --format tar --tokenizer byte --out "$dir/x"
expect_error "no documents found in $dir/docs" \
  prepare --input "$dir/docs" --glob '*.md' --tokenizer byte --out "$dir/x"
expect_error "unknown tokenizer 'nonsense'" \
  prepare --input "$dir/docs" --tokenizer nonsense --out "$dir/x"
expect_error "$dir/no/such/dir/x.bin.tmp" \
  prepare --input "$dir/docs" --tokenizer byte --out "$dir/no/such/dir/x"
timeout 30 "$meshloom" prepare --input "$dir/docs" --format parquet --tokenizer byte \
  --out "$dir/x" >"$dir/out" 2>&1
(($? == 2)) || fail "an unknown --format did not exit 2"

# Good runs, with the report's counts.
expect_ok prepare --input "$dir/docs" --tokenizer byte --out "$dir/t1" --threads 1
grep -q 'documents   2$' "$dir/out" || fail "text: expected 2 documents"
grep -q '1 empty, 0 unreadable' "$dir/out" || fail "text: empty file not counted"
grep -q '^  invalid     1 documents with invalid UTF-8' "$dir/out" || fail "text: invalid UTF-8 not counted"
expect_ok prepare --input "$dir/docs" --tokenizer byte --out "$dir/t3" --threads 3
cmp -s "$dir/t1.bin" "$dir/t3.bin" && cmp -s "$dir/t1.idx" "$dir/t3.idx" ||
  fail "output differs between 1 and 3 threads"
expect_ok prepare --input "$dir/data.jsonl" --format jsonl --tokenizer byte --out "$dir/j"
grep -q 'documents   2$' "$dir/out" || fail "jsonl: expected 2 documents"
grep -qF "$dir/data.jsonl:2: not valid JSON" "$dir/out" || fail "jsonl: bad line not named"
# JSON Lines as datasets are shipped, gzip and zstd: the same dataset as the
# plain file; a truncated stream is refused, naming the file.
for z in gz zst; do
  case $z in gz) gzip -c ;; zst) zstd -q -c ;; esac <"$dir/data.jsonl" >"$dir/data.jsonl.$z"
  expect_ok prepare --input "$dir/data.jsonl.$z" --format jsonl --tokenizer byte --out "$dir/j$z"
  grep -qF "$dir/data.jsonl.$z:2: not valid JSON" "$dir/out" || fail "jsonl.$z: bad line not named"
  cmp -s "$dir/j.bin" "$dir/j$z.bin" && cmp -s "$dir/j.idx" "$dir/j$z.idx" ||
    fail "jsonl.$z: another dataset than the plain file's"
  head -c 20 "$dir/data.jsonl.$z" >"$dir/cut.jsonl.$z"
  expect_error "cannot read input $dir/cut.jsonl.$z: cannot decompress" \
    prepare --input "$dir/cut.jsonl.$z" --format jsonl --tokenizer byte --out "$dir/x"
done
expect_ok prepare --input "$dir/docs.tar.gz" --format tar --tokenizer byte --out "$dir/tar"
grep -q 'documents   2$' "$dir/out" || fail "tar: expected 2 documents"
expect_ok inspect "$dir/tar" --show 0
grep -qx 'alpha' "$dir/out" || fail "inspect --show 0 is not the first member"
expect_ok inspect "$dir/t1"
grep -q 'uint16, 2 sequences, 2 documents, 17 tokens' "$dir/out" || fail "inspect summary wrong"

# Corrupt datasets given to inspect (the loaders' reader validates the same way).
cp "$dir/t1.bin" "$dir/bad.bin"
{ printf 'NOTMEGA\0\0'; tail -c +10 "$dir/t1.idx"; } >"$dir/bad.idx"
expect_error "$dir/bad.idx: wrong magic" inspect "$dir/bad"
head -c 40 "$dir/t1.idx" >"$dir/bad.idx"
expect_error "$dir/bad.idx: truncated" inspect "$dir/bad"
cp "$dir/t1.idx" "$dir/bad.idx"
head -c 4 "$dir/t1.bin" >"$dir/bad.bin"
expect_error "runs past the end of $dir/bad.bin" inspect "$dir/bad"
expect_error "cannot open $dir/missing.idx" inspect "$dir/missing"
echo "ok: $n cli cases"
