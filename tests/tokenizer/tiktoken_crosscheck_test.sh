#!/usr/bin/env bash
# `meshloom tokenize` against the npm tiktoken package (OpenAI's Rust
# tokenizer in WASM), id for id: every text of the reference file plus a few
# KB each of the real corpora scripts/setup.sh installs (Python docs and
# source, the King James Bible, fortunes: camelCase, digit runs, non-ASCII,
# mojibake), and for o200k/cl100k a probe of every code point's class. The
# only independent check of o200k_base, whose ids the reference file lacks,
# and of gpt2/cl100k_base beyond short texts. A missing node, npm package or
# corpus is a broken setup: a failure, not a skip.
#   tiktoken_crosscheck_test.sh MESHLOOM REFERENCE.jsonl [ENCODING...]
set -euo pipefail
meshloom=$1 reference=$2
shift 2
encodings=("$@")
((${#encodings[@]})) || encodings=(o200k_base cl100k_base gpt2)
here=$(cd "$(dirname "$0")" && pwd)
compare=$here/tiktoken_compare.mjs
fail() { echo "FAIL: $*"; exit 1; }

command -v node >/dev/null || fail "node not found; run scripts/setup.sh"
[[ -f $here/../../third_party/npm/node_modules/tiktoken/package.json ]] ||
  fail "npm tiktoken not in third_party/npm; run scripts/setup.sh"
[[ -f $reference ]] || fail "reference file $reference missing"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

node "$compare" split "$reference" "$dir" || fail "cannot split $reference"
mapfile -t files < <(find "$dir" -name 'ref*.txt' | LC_ALL=C sort)
((${#files[@]} >= 20)) || fail "only ${#files[@]} texts in $reference"

# passage NAME COMMAND...: the command's output (a few KB of real text).
passage() {
  local out=$dir/$1.txt
  shift
  if ! "$@" >"$out" 2>/dev/null || [[ ! -s $out ]]; then
    fail "no text from '$*' (python3.11-doc, bible-kjv, fortunes); run scripts/setup.sh"
  fi
  files+=("$out")
}
docs=/usr/share/doc/python3.11/html/_sources
fortunes=/usr/share/games/fortunes
passage pydocs_logging sed -n 1,140p "$docs/library/logging.rst.txt"       # getLogger, setLevel
passage pydocs_datetime sed -n 195,300p "$docs/library/datetime.rst.txt"   # digit runs, signs
passage pydocs_unicode_howto cat "$docs/howto/unicode.rst.txt"             # Ⅷ ♞ 😀 ß é, 31 KB
passage py_logging_source sed -n 1,200p /usr/lib/python3.11/logging/__init__.py  # StreamHandler
passage kjv_genesis_1_2 bible gen1:1-gen2:25                              # verse numbers
passage fortunes_computers sed -n 5420,5480p "$fortunes/computers"         # UTF-8 with C1 controls
passage fortunes_law sed -n 1270,1310p "$fortunes/law"                     # double-encoded UTF-8
passage fortunes_linux sed -n 1,100p "$fortunes/linux"                     # Linuxkongreß '95

node "$compare" probe "$dir/probe_code_points.txt" || fail "cannot write the code point probe"

status=0
for enc in "${encodings[@]}"; do
  spec=tiktoken:$enc texts=("${files[@]}" "$dir/probe_code_points.txt")
  # The real encoder.json + vocab.bpe; GPT-2 splits before "," anyway: no probe.
  [[ $enc == gpt2 ]] && spec=gpt2 texts=("${files[@]}")
  "$meshloom" tokenize --tokenizer "$spec" "${texts[@]}" >"$dir/$enc.ids" ||
    fail "meshloom tokenize --tokenizer $spec exited $?"
  node "$compare" compare "$enc" "$dir/$enc.ids" "${texts[@]}" || status=1
done
exit "$status"
