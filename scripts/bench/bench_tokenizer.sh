#!/usr/bin/env bash
# bench_tokenizer.sh: BPE encode throughput per core, meshloom vs the npm
# `tiktoken` package (Rust compiled to WASM), on the same real text.
#
#   scripts/bench/bench_tokenizer.sh                 gpt2 and cl100k_base, best of 3
#   BUILD_DIR=build-tok RUNS=5 ENCODINGS=gpt2 scripts/bench/bench_tokenizer.sh
#   PIN=1 scripts/bench/bench_tokenizer.sh           pin both to one core (taskset)
#
# Corpora: Python 3.11 docs (*.rst.txt, prose) and the Python standard library
# top-level modules (*.py, code). Both sides encode on one thread, read the
# files before timing, and must report the same token count (a whole-corpus
# exactness check). Not pinned by default: pinning also squeezes V8's helper
# threads (GC, JIT) onto that core, which would flatter the ratio. Prints a
# markdown table and writes bench/results/tokenizer.csv and tokenizer.png.
# Builds what is missing first (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
RUNS=${RUNS:-3}
ENCODINGS=${ENCODINGS:-gpt2 cl100k_base}
BIN=$BUILD_DIR/app/meshloom
OUT=bench/results/tokenizer.csv

[[ -x $BIN && -d third_party/npm/node_modules/tiktoken ]] || scripts/setup.sh >/dev/null
[[ -x $BIN ]] || { echo "bench_tokenizer: $BIN not built (cmake --build $BUILD_DIR --target meshloom)" >&2; exit 2; }
command -v node >/dev/null || { echo "bench_tokenizer: node not found (scripts/setup.sh)" >&2; exit 2; }
[[ -d third_party/npm/node_modules/tiktoken ]] || { echo "bench_tokenizer: npm tiktoken missing (scripts/setup.sh)" >&2; exit 2; }

source scripts/bench/tokenizer_common.sh

mkdir -p "$(dirname "$OUT")"
echo "corpus,encoding,files,bytes,tokens,meshloom_mb_s,tiktoken_wasm_mb_s,ratio,cpu,date" >"$OUT"
rows=()
for corpus in python-docs python-stdlib; do
  mapfile -t files < <(printf '%s\n' "${CORPUS[$corpus]}" | sed '/^$/d')
  if ((${#files[@]} == 0)); then
    echo "bench_tokenizer: no files for $corpus, skipped (apt install python3.11-doc)" >&2
    continue
  fi
  for enc in $ENCODINGS; do
    spec=$enc
    [[ $enc == gpt2 ]] || spec=tiktoken:$enc
    best_ml=0 best_js=0 ml_tokens="" js_tokens="" bytes=""
    for ((r = 0; r < RUNS; ++r)); do
      line=$("${PIN_CMD[@]}" "$BIN" tokenize --tokenizer "$spec" --bench "${files[@]}")
      mbs=$(field mb_per_s "$line")
      ml_tokens=$(field tokens "$line")
      bytes=$(field bytes "$line")
      best_ml=$(echo "if ($mbs > $best_ml) $mbs else $best_ml" | bc)
      # tiktoken-wasm ENC BYTES TOKENS SECONDS MB/s
      read -r _ _ js_bytes js_tokens _ js_mbs < <("${PIN_CMD[@]}" node scripts/bench/bench_tokenizer.mjs --encoding "$enc" "${files[@]}")
      best_js=$(echo "if ($js_mbs > $best_js) $js_mbs else $best_js" | bc)
    done
    if [[ $ml_tokens != "$js_tokens" || $bytes != "$js_bytes" ]]; then
      echo "bench_tokenizer: $corpus/$enc: meshloom $ml_tokens tokens of $bytes bytes, tiktoken $js_tokens of $js_bytes" >&2
      exit 1
    fi
    ratio=$(echo "scale=2; $best_ml / $best_js" | bc)
    rows+=("| $corpus | $enc | ${#files[@]} | $(printf '%.1f' "$(echo "scale=3; $bytes / 1000000" | bc)") | $ml_tokens | $best_ml | $best_js | ${ratio}x |")
    echo "$corpus,$enc,${#files[@]},$bytes,$ml_tokens,$best_ml,$best_js,$ratio,$cpu,$date" >>"$OUT"
  done
done

echo "Encode throughput, one thread, best of $RUNS (MB = 10^6 bytes; same token counts on both sides)"
echo
echo "| corpus | encoding | files | MB | tokens | meshloom MB/s | npm tiktoken (WASM) MB/s | ratio |"
echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
printf '%s\n' "${rows[@]}"
/usr/bin/python3 scripts/plot/plot_tokenizer.py "$OUT" "${OUT%.csv}.png"
echo
echo "CSV: $OUT; plot: ${OUT%.csv}.png"
