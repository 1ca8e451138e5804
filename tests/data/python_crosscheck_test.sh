#!/usr/bin/env bash
# Cross-checks meshloom's indexed datasets with scripts/data/megatron_idx.py, an
# independent numpy implementation of Megatron-LM's layout:
#   1. `meshloom prepare --tokenizer byte` output read by Python must be each
#      file's bytes followed by end-of-text 256, in sorted path order;
#   2. Python's dump and `meshloom inspect --dump` must agree token for token;
#   3. a file written by Python (int32, several sequences per document) must
#      read back identically through `meshloom inspect`.
#   python_crosscheck_test.sh MESHLOOM SCRIPT
set -u
meshloom=$1 script=$2
python=/usr/bin/python3
if ! "$python" -c 'import numpy' 2>/dev/null; then
  echo "SKIP: $python with numpy not found"
  exit 77  # ctest's SKIP_RETURN_CODE: reported as Skipped, not Passed
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

mkdir -p "$dir/in/sub/deeper" "$dir/in/other"
printf 'Hello, world.\n' >"$dir/in/a.txt"
printf 'caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\n' >"$dir/in/sub/utf8.txt"
head -c 70000 /dev/zero | tr '\0' 'x' >"$dir/in/sub/deeper/long.txt"
printf 'line one\r\nline two\r\n' >"$dir/in/other/crlf.txt"
: >"$dir/in/other/empty.txt"
for i in $(seq 1 40); do printf 'document %d\n' "$i" >"$dir/in/other/n$i.txt"; done

"$meshloom" prepare --input "$dir/in" --tokenizer byte --out "$dir/ds" --threads 2 >"$dir/log" 2>&1 ||
  { cat "$dir/log"; fail "prepare exited $?"; }
mapfile -t files < <(find "$dir/in" -type f -size +0 | LC_ALL=C sort)
"$python" "$script" check-bytes --eot 256 "$dir/ds" "${files[@]}" || fail "Python disagrees with prepare"
"$python" "$script" info "$dir/ds" | grep -q '"dtype": "uint16"' || fail "dtype is not uint16"

"$python" "$script" dump "$dir/ds" >"$dir/py.txt" || fail "Python dump failed"
"$meshloom" inspect "$dir/ds" --dump >"$dir/ml.txt" || fail "meshloom inspect --dump failed"
cmp -s "$dir/py.txt" "$dir/ml.txt" || fail "Python and meshloom dumps differ"

# Python writes int32 with ids past uint16, 3 sequences per document; an empty sequence too.
printf '1 2 3\n70000 2147483647\n\n4\n5 6\n' >"$dir/seqs.txt"
"$python" "$script" write "$dir/py32" --dtype int32 --sequences-per-doc 3 <"$dir/seqs.txt" ||
  fail "Python write failed"
"$meshloom" inspect "$dir/py32" --dump >"$dir/ml32.txt" || fail "meshloom cannot read Python's file"
cmp -s "$dir/seqs.txt" "$dir/ml32.txt" || fail "meshloom reads Python's int32 file differently"
"$meshloom" inspect "$dir/py32" | grep -q 'int32, 5 sequences, 2 documents, 8 tokens' ||
  fail "wrong summary: $("$meshloom" inspect "$dir/py32")"
echo "ok: ${#files[@]} documents cross-checked with $script"
