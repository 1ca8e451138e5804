# Shared by the end-to-end test scripts (source it): a work folder removed on
# exit, fail(), and real text prepared as a small byte-level indexed dataset.

dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$dir"' EXIT
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

fail() { echo "FAIL: $*"; exit 1; }

# expect_error TEXT COMMAND...: COMMAND (a program, or a function of the
# script) exits 2 with one error line, and that line contains TEXT.
expect_error() {
  local text=$1 out rc
  shift
  out=$("$@" 2>&1)
  rc=$?
  ((rc == 2)) || fail "$* exited $rc, expected 2: $out"
  grep -qF -- "$text" <<<"$out" || fail "$*: no '$text' in: $out"
  (($(grep -c '^meshloom: error' <<<"$out") == 1)) || fail "$*: not one error line: $out"
}

# metrics_table RUN: "step data_hash loss" for each step of $dir/RUN's
# metrics.jsonl, the loss exact (repr): what bit-identical resumes compare.
metrics_table() {
  /usr/bin/python3 -c '
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if "step" in r: print(r["step"], r["data_hash"], repr(r["loss"]))' "$dir/$1/metrics.jsonl"
}

# train_dump NAME CONFIG TRAINERS STEP ARGS...: $meshloom trains $dir/CONFIG.yaml
# on 2 + TRAINERS ranks under $mpiexec into $dir/NAME, dumping step STEP to
# $dir/NAME.h5 (its log: $dir/NAME.txt, printed when it fails).
train_dump() {
  local name=$1 cfg=$2 t=$3 step=$4
  shift 4
  timeout 300 "$mpiexec" --oversubscribe --bind-to none -np $((2 + t)) "$meshloom" train \
    -c "$dir/$cfg.yaml" --set run.dir="$dir/$name" --dump-step "$step" "$dir/$name.h5" "$@" \
    >"$dir/$name.txt" 2>&1 || { cat "$dir/$name.txt"; fail "$name: meshloom train failed"; }
}

# job_exit FILE: the exit code of a job run under `mpirun --enable-recovery`
# (which exits 0 whatever its ranks return) from the lines the ranks append to
# MESHLOOM_EXIT_FILE: the largest code written, or 1 when rank 0 wrote none.
job_exit() {
  awk '$1 == "rank" && $2 == 0 { lead = 1 } $4 > worst { worst = $4 }
       END { print (worst > 0 ? worst : (lead ? 0 : 1)) }' "$1" 2>/dev/null || echo 1
}

# pack_test_images NAME: the committed test images (tests/data/images) as a
# WebDataset shard $dir/shards/NAME-000000.tar, captions from the file names.
pack_test_images() {
  /usr/bin/python3 "$root/scripts/data/pack_images.py" "$dir/shards/$1" "$root/tests/data/images" \
    >/dev/null || fail "pack_images.py"
}

# prepare_docs NAME GLOB: the Python library docs matching GLOB (installed by
# scripts/setup.sh) as $dir/NAME.bin/.idx, byte tokenizer.
prepare_docs() {
  mkdir -p "$dir/$1"
  cp /usr/share/doc/python3.11/html/_sources/library/$2.rst.txt "$dir/$1/" || fail "python3.11-doc missing"
  "$meshloom" prepare --input "$dir/$1" --format text --tokenizer byte --out "$dir/$1" >/dev/null ||
    fail "prepare $1"
}
