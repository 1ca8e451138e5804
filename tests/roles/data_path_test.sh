#!/usr/bin/env bash
# The data path end to end on real text (installed by scripts/setup.sh):
#  - layout invariance: the global batches (hash and HDF5 dump) are identical
#    for (constructors, loaders) = (1,1), (1,2), (2,3), (2,4), with a
#    curriculum and a raw JSONL source tokenized on the fly (more costly per
#    token than the prepared one) that make the lead re-partition loaders
#    while running, and in colocated mode (in the trainer, and with
#    DataLoader-style worker processes, whose memory the trainer reports);
#  - the raw source and its prepared twin deliver the same batches;
#  - mixing: realized shares are within 2 points of the schedule;
#  - bad input: a missing source and a corrupt .idx give one clear message
#    and a non-zero exit on every rank, quickly.
#   data_path_test.sh MESHLOOM MPIEXEC
set -u
meshloom=$1 mpiexec=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
run() { timeout 60 "$mpiexec" --oversubscribe --bind-to none "$@"; }

# Real text, byte-tokenized (fast): Python docs, fortunes.
mkdir -p "$dir/pydocs"
cp /usr/share/doc/python3.11/html/_sources/library/*.rst.txt "$dir/pydocs/" || fail "python3.11-doc missing"
/usr/bin/python3 "$(dirname "$0")/../../scripts/data/corpora.py" fortunes "$dir/fortunes.jsonl" >/dev/null
"$meshloom" prepare --input "$dir/pydocs" --format text --tokenizer byte --out "$dir/pydocs" >/dev/null ||
  fail "prepare pydocs"
"$meshloom" prepare --input "$dir/fortunes.jsonl" --format jsonl --tokenizer byte --out "$dir/fortunes" \
  >/dev/null || fail "prepare fortunes"
cat >"$dir/c.yaml" <<YAML
run: {timeout: 30}
model: {vocab_size: 257}
data:
  seq_len: 4096
  tokens_per_step: 16384
  rebalance_every: 2
  sources:
    - {name: pydocs, path: $dir/pydocs}
    - {name: fortunes, path: $dir/fortunes.jsonl, format: jsonl, tokenizer: byte}
  schedule:
    - {step: 0, weights: {pydocs: 9, fortunes: 1}}
    - {step: 40, weights: {pydocs: 1, fortunes: 9}}
YAML
# A sanitizer run on a loaded machine: a loader's answer may take over the
# default 5 s, and a loader counted dead makes the job end non-zero.
[[ -n ${MESHLOOM_SANITIZER_LOGS:-} ]] && echo "faults: {loader_timeout: 60}" >>"$dir/c.yaml"

hashes=()
for layout in "1 1 1" "1 2 2" "2 3 1" "2 4 3"; do
  read -r k l t <<<"$layout"
  np=$((k + l + t))
  out=$dir/out-$k-$l.txt
  run -np $np "$meshloom" data -c "$dir/c.yaml" --steps 40 --set cluster.roles.constructors=$k \
    --set cluster.roles.loaders=$l --dump "$dir/dump-$k-$l.h5" >"$out" 2>&1 ||
    { cat "$out"; fail "layout $layout exited non-zero"; }
  h=$(sed -n 's/^batch hash: //p' "$out")
  echo "layout constructors=$k loaders=$l trainers=$t: hash $h, $(grep -o '[0-9]* loader re-partition' "$out")"
  hashes+=("$h")
  # Shares within 2 points of the schedule.
  awk '/^(pydocs|fortunes) / { a=$3; b=$4; sub("%","",a); sub("%","",b); d=a-b; if (d<0) d=-d;
       if (d>2) { print "share off by " d " points: " $0; exit 1 } }' "$out" || fail "mixing"
done
grep -q '[1-9][0-9]* loader re-partition' "$dir/out-2-4.txt" || fail "no runtime re-partitioning at 4 loaders"
run -np 3 "$meshloom" data -c "$dir/c.yaml" --steps 40 --set data.mode=colocated \
  --set cluster.roles.loaders=0 --dump "$dir/dump-colocated.h5" >"$dir/col.txt" 2>&1 ||
  { cat "$dir/col.txt"; fail "colocated run"; }
hashes+=("$(sed -n 's/^batch hash: //p' "$dir/col.txt")")
run -np 3 "$meshloom" data -c "$dir/c.yaml" --steps 40 --set data.mode=colocated \
  --set cluster.roles.loaders=0 --set data.colocated_processes=2 --dump "$dir/dump-processes.h5" \
  --report "$dir/processes.json" >"$dir/proc.txt" 2>&1 || { cat "$dir/proc.txt"; fail "colocated worker processes"; }
hashes+=("$(sed -n 's/^batch hash: //p' "$dir/proc.txt")")
/usr/bin/python3 -c 'import json, sys; sys.exit(json.load(open(sys.argv[1]))["roles"]["trainer"]["worker_pss_sum_kib"] <= 0)' \
  "$dir/processes.json" ||
  { cat "$dir/processes.json"; fail "no worker process memory in the report"; }
! pgrep -f "data-worker --rank" >/dev/null || fail "data worker processes outlived the run"
for h in "${hashes[@]}"; do [[ $h == "${hashes[0]}" && -n $h ]] || fail "hashes differ: ${hashes[*]}"; done
for f in dump-1-2 dump-2-3 dump-2-4 dump-colocated dump-processes; do
  for ds in tokens samples/source samples/doc samples/offset samples/length steps/first_sample; do
    h5diff "$dir/dump-1-1.h5" "$dir/$f.h5" "/$ds" >/dev/null || fail "$f.h5 differs from dump-1-1.h5 in /$ds"
  done
done
echo "ok: identical global batches across 6 layouts (hash ${hashes[0]})"
run -np 4 "$meshloom" data -c "$dir/c.yaml" --steps 40 --set data.sources.1.path="$dir/fortunes" \
  --set data.sources.1.format=indexed >"$dir/twin.txt" 2>&1 || { cat "$dir/twin.txt"; fail "prepared twin"; }
[[ $(sed -n 's/^batch hash: //p' "$dir/twin.txt") == "${hashes[0]}" ]] || fail "prepared twin differs from raw JSONL"
echo "ok: raw JSONL and its prepared twin give the same batches"

# Bad input: one clear message, non-zero exit, within seconds.
bad() {  # expect args...
  local expect=$1; shift
  local start=$SECONDS
  run -np 4 "$meshloom" data -c "$dir/c.yaml" --steps 3 "$@" >"$dir/bad.txt" 2>&1
  local rc=$?
  ((rc != 0 && rc != 124)) || { cat "$dir/bad.txt"; fail "bad input: rc=$rc for $*"; }
  grep -qF -- "$expect" "$dir/bad.txt" || { cat "$dir/bad.txt"; fail "message lacks: $expect"; }
  (($(grep -c '^meshloom: error' "$dir/bad.txt") == 1)) || { cat "$dir/bad.txt"; fail "not one message"; }
  limit=20; [[ -n ${MESHLOOM_SANITIZER_LOGS:-} ]] && limit=60  # sanitized ranks start slowly
((SECONDS - start < limit)) || fail "took $((SECONDS - start)) s"
  echo "ok: $(grep '^meshloom: error' "$dir/bad.txt")"
}
ix=(--set data.sources.1.format=indexed)
bad "$dir/missing.idx" --set data.sources.1.path="$dir/missing" "${ix[@]}"
cp "$dir/fortunes.bin" "$dir/torn.bin"
head -c 100 "$dir/fortunes.idx" >"$dir/torn.idx"
bad "torn.idx" --set data.sources.1.path="$dir/torn" "${ix[@]}"
cp "$dir/fortunes.idx" "$dir/magic.idx"; cp "$dir/fortunes.bin" "$dir/magic.bin"
printf 'XXXX' | dd of="$dir/magic.idx" conv=notrunc status=none
bad "magic.idx" --set data.sources.1.path="$dir/magic" "${ix[@]}"
cp "$dir/fortunes.idx" "$dir/short.idx"; head -c 1000 "$dir/fortunes.bin" >"$dir/short.bin"
bad "short.bin" --set data.sources.1.path="$dir/short" "${ix[@]}"
printf '{"text": "fine"}\n' >"$dir/nothing.jsonl"
# A data worker process that dies: its trainer names it and the job ends.
start=$SECONDS
# This job's worker only: another checkout's test on the same machine runs
# workers with the same command line (and kill -9'd this one's).
DATA_PATH_TEST_DIR=$dir run -np 3 "$meshloom" data -c "$dir/c.yaml" --steps 100000 \
  --set data.mode=colocated --set cluster.roles.loaders=0 --set data.colocated_processes=2 \
  >"$dir/killed.txt" 2>&1 &
job=$!
victim=
for _ in $(seq 100); do
  for p in $(pgrep -f "data-worker --rank 2 --index 1"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "DATA_PATH_TEST_DIR=$dir" && victim=$p
  done
  [[ -n $victim ]] && break
  sleep 0.1
done
[[ -n $victim ]] || fail "no data worker process found"
sleep 0.3
kill -9 "$victim"
wait $job && fail "the job went on after a data worker died"
grep -q "data worker 1 (pid $victim) .*killed by signal 9" "$dir/killed.txt" ||
  { cat "$dir/killed.txt"; fail "no message naming the dead data worker"; }
limit=20; [[ -n ${MESHLOOM_SANITIZER_LOGS:-} ]] && limit=60  # sanitized ranks start slowly
((SECONDS - start < limit)) || fail "a dead data worker took $((SECONDS - start)) s to end the job"
echo "ok: $(grep -o 'rank 2: data worker 1.*' "$dir/killed.txt")"
bad "missing.jsonl" --set data.sources.1.path="$dir/missing.jsonl"
echo "data path test passed"
