#!/usr/bin/env bash
# bench_data.sh: the data plane benchmark (issue "Data plane", item
# "Benchmark"), on real text, on this machine:
#   1. prepare throughput: GPT-2 BPE MB/s on one core, meshloom (`tokenize
#      --bench` and `prepare --threads 1`) side by side with the npm `tiktoken`
#      package (WASM) on the same files;
#   2. delivered tokens/s versus loader count (1, 2, 4, 8) for 4 trainers, on
#      8 sources: 7 raw (text / JSON Lines, GPT-2 tokenized on the fly by the
#      loaders) and 1 prepared (indexed, memory-mapped);
#   3. memory of the data path (PSS), disaggregated loaders versus the
#      colocated baseline (every trainer opens every source), 8 and 16 trainers;
#   4. an image-text source (Debian's openclipart PNGs packed into WebDataset
#      shards) mixed 1:1 with a raw text source: delivered samples/s and
#      tokens/s versus loaders (1, 2, 4, 8) for 4 trainers, which source the
#      loaders are re-partitioned to, decode work; and data path memory,
#      disaggregated versus DataLoader-style worker processes, 8 and 16 trainers.
# Prints markdown tables; writes CSV and PNG files under bench/results/
# (data_*.csv, data_*.png, data_tables.md). docs/bench_data.md explains the
# measurements and the definition of "data path memory".
#
#   scripts/bench/bench_data.sh                    build if needed, run everything
#   BENCH_NO_BUILD=1 scripts/bench/bench_data.sh   use the existing build
#   REPS=5 RUNS=5 scripts/bench/bench_data.sh      more repetitions
#   PIN=1 scripts/bench/bench_data.sh              pin part 1 to one core (taskset)
#   PARTS="4" scripts/bench/bench_data.sh          only the image part (~5 min on 2 cores)
#   PARTS="2 3" scripts/bench/bench_data.sh        only some parts (the tables are made
#                                            from every *_runs.csv in bench/results,
#                                            so parts not run show earlier results)
#
# Without BENCH_NO_BUILD it installs what is missing (scripts/setup.sh) and
# builds the meshloom target only. About 2.5 minutes of benchmarks on 2 cores for
# parts 1-3, and 4 more for part 4.
#
# Generated sources and configs go to WORK (data/bench, git-ignored). Every
# mpirun is bounded by TIMEOUT seconds.
set -euo pipefail
cd "$(dirname "$0")/../.."
t_start=$(date +%s)
BUILD_DIR=${BUILD_DIR:-build}
BIN=$BUILD_DIR/app/meshloom
# Absolute: a relative path written in a config resolves against the config's folder.
WORK=$(realpath -m "${WORK:-data/bench}")
RES=${RESULTS:-bench/results}
RUNS=${RUNS:-3}            # part 1: best of RUNS
REPS=${REPS:-3}            # part 2: median of REPS
TIMEOUT=${TIMEOUT:-150}    # seconds per mpirun
PARTS=${PARTS:-1 2 3 4}
LOADERS=${LOADERS:-1 2 4 8}
TPUT_TRAINERS=${TPUT_TRAINERS:-4}
TPUT_STEPS=${TPUT_STEPS:-500}        # 500 x 16384 tokens: about 0.75 epoch of the mixture
MEM_TRAINERS=${MEM_TRAINERS:-8 16}
MEM_LOADERS=${MEM_LOADERS:-1 2 4}    # disaggregated layouts measured (2 is the headline)
MEM_LEAN_LOADERS=${MEM_LEAN_LOADERS-1 2}  # lean loaders: no shadows, no token cache ("" to skip)
MEM_STEPS=${MEM_STEPS:-100}
MEM_LONG_TRAINERS=${MEM_LONG_TRAINERS:-16}
MEM_LONG_STEPS=${MEM_LONG_STEPS-400}  # also measure 16 trainers after 400 steps ("" to skip)
IMG_COUNT=${IMG_COUNT:-3000}          # part 4: openclipart images packed (of 8,121)
IMG_MAX_SIDE=${IMG_MAX_SIDE:-256}     # data.image.max_side (patch 16: up to 256 patches an image)
IMG_WORKERS=${IMG_WORKERS:-1}         # data.workers of the throughput runs (decode threads a loader)
IMG_TPUT_STEPS=${IMG_TPUT_STEPS:-40}
IMG_REPS=${IMG_REPS:-1}
IMG_MEM_TRAINERS=${IMG_MEM_TRAINERS:-8 16}
IMG_MEM_LOADERS=${IMG_MEM_LOADERS:-2 4}
IMG_MEM_PROCESSES=${IMG_MEM_PROCESSES:-2}  # worker processes per colocated trainer
IMG_MEM_LEAN_LOADERS=${IMG_MEM_LEAN_LOADERS-1 2}  # lean: no shadows, small decoded cache ("" to skip)
IMG_LEAN_CACHE_MIB=${IMG_LEAN_CACHE_MIB:-32}
IMG_MEM_STEPS=${IMG_MEM_STEPS:-30}
CLIPART=/usr/share/openclipart/png
PY=/usr/bin/python3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN=(mpirun --oversubscribe --bind-to none)

say() { printf '[bench_data] %s\n' "$*" >&2; }
load1() { cut -d" " -f1 /proc/loadavg; }
has_part() { [[ " $PARTS " == *" $1 "* ]]; }

if [[ ${BENCH_NO_BUILD:-0} != 1 ]]; then
  # Packages and vocabularies as scripts/setup.sh installs them; then only the
  # meshloom target (configured as setup.sh does), not the tests.
  SETUP_NO_BUILD=1 scripts/setup.sh >&2
  if [[ ! -f $BUILD_DIR/build.ninja ]]; then
    say "configuring $BUILD_DIR (Release)"
    cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DMESHLOOM_CUDA="${MESHLOOM_CUDA:-ON}" >/dev/null
  fi
  say "building $BIN"
  cmake --build "$BUILD_DIR" --target meshloom -j "${BUILD_JOBS:-$(nproc)}" >&2
  t_built=$(date +%s)
  say "build took $((t_built - t_start)) s"
fi
t_bench=$(date +%s)
[[ -x $BIN ]] || { say "$BIN not built (scripts/setup.sh)"; exit 2; }
DOCS=/usr/share/doc/python3.11/html/_sources
STDLIB=/usr/lib/python3.11
if has_part 1 || has_part 2 || has_part 3; then
  command -v node >/dev/null || { say "node not found (scripts/setup.sh)"; exit 2; }
  [[ -d third_party/npm/node_modules/tiktoken ]] || { say "npm tiktoken missing (scripts/setup.sh)"; exit 2; }
  [[ -d $DOCS && -f $STDLIB/os.py ]] || { say "python3.11-doc / python3.11 missing (scripts/setup.sh)"; exit 2; }
fi
if has_part 4; then
  [[ -d $CLIPART ]] || { say "$CLIPART missing (apt-get install openclipart-png)"; exit 2; }
fi

mkdir -p "$WORK/raw" "$WORK/prepared" "$WORK/configs" "$WORK/reports" "$RES"
cpu=$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1 | tr ',' ' ')
date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
say "machine: $(nproc) cores ($cpu), load average $(cut -d' ' -f1-3 /proc/loadavg)"

# --- real text -----------------------------------------------------------------
if has_part 1 || has_part 2 || has_part 3; then
  [[ -f $WORK/raw/docs_other.jsonl && -f $WORK/raw/stdlib_pkgs.jsonl ]] ||
    $PY scripts/bench/bench_data_corpora.py "$WORK/raw" >&2
fi
[[ -f $WORK/raw/bible.jsonl ]] || $PY scripts/data/corpora.py bible "$WORK/raw/bible.jsonl" >&2
[[ -f $WORK/raw/fortunes.jsonl ]] || $PY scripts/data/corpora.py fortunes "$WORK/raw/fortunes.jsonl" >&2

# --- 1. prepare throughput ---------------------------------------------------------
# Not pinned by default (as scripts/bench/bench_tokenizer.sh: pinning squeezes V8's
# GC and JIT threads onto tiktoken's core). `prepare --threads 1` runs three
# threads (reader, one tokenizer, writer), so it also runs pinned to one core
# (taskset): that is the per-core figure compared with tiktoken.
PIN_CMD=()
ONE_CORE=()
if command -v taskset >/dev/null; then ONE_CORE=(taskset -c "$(($(nproc) - 1))"); fi
if [[ ${PIN:-0} == 1 ]]; then PIN_CMD=("${ONE_CORE[@]}"); fi
field() { tr ' ' '\n' <<<"$2" | sed -n "s/^$1=//p"; }
now() { date +%s.%N; }

declare -A CORPUS
CORPUS[python-docs]=$(find "$DOCS" -name '*.rst.txt' 2>/dev/null | sort || true)
CORPUS[python-stdlib]=$(ls "$STDLIB"/*.py 2>/dev/null | sort || true)
prepare_one() {  # corpus [cmd prefix...]: prepares it into $WORK/prepared/<corpus>;
  # echoes "MB/s (prepare's own timer) start end tokens documents"
  local corpus=$1 out t0 t1 mbs tokens docs
  shift
  mapfile -t files < <(printf '%s\n' "${CORPUS[$corpus]}")
  t0=$(now)
  out=$("$@" "$BIN" prepare --input "${files[@]}" --format text --tokenizer gpt2 \
    --threads 1 --out "$WORK/prepared/$corpus")
  t1=$(now)
  mbs=$(sed -n 's/.* \([0-9.]*\) MB\/s of text.*/\1/p' <<<"$out")
  tokens=$(sed -n 's/^  tokens *\([0-9,]*\) .*/\1/p' <<<"$out" | tr -d ,)
  docs=$(sed -n 's/^  documents *\([0-9,]*\).*/\1/p' <<<"$out" | tr -d ,)
  echo "$mbs $t0 $t1 $tokens $docs"
}

if has_part 1; then
  say "1. prepare throughput (GPT-2, one thread, best of $RUNS)"
  echo "corpus,run,files,bytes,tokens,tiktoken_tokens,prepare_tokens,prepare_docs,tiktoken_wasm_mb_s,meshloom_tokenize_mb_s,meshloom_prepare_mb_s,meshloom_prepare_1core_mb_s,meshloom_prepare_1core_wall_mb_s,pinned,cpu,date,load1" \
    >"$RES/data_prepare_runs.csv"
  for corpus in python-docs python-stdlib; do
    mapfile -t files < <(printf '%s\n' "${CORPUS[$corpus]}")
    for ((r = 0; r < RUNS; ++r)); do
      # tiktoken-wasm ENC BYTES TOKENS SECONDS MB/s
      read -r _ _ js_bytes js_tokens _ js_mbs < <("${PIN_CMD[@]}" node scripts/bench/bench_tokenizer.mjs --encoding gpt2 "${files[@]}")
      line=$("${PIN_CMD[@]}" "$BIN" tokenize --tokenizer gpt2 --bench "${files[@]}")
      ml_mbs=$(field mb_per_s "$line") ml_tokens=$(field tokens "$line") bytes=$(field bytes "$line")
      read -r p_mbs _ _ p_tokens p_docs < <(prepare_one "$corpus" "${PIN_CMD[@]}")
      read -r c_mbs t0 t1 c_tokens _ < <(prepare_one "$corpus" "${ONE_CORE[@]}")
      wall_mbs=$(echo "scale=2; $bytes / ($t1 - $t0) / 1000000" | bc)
      if [[ $ml_tokens != "$js_tokens" || $bytes != "$js_bytes" || $p_tokens != $((ml_tokens + p_docs)) ||
            $c_tokens != "$p_tokens" ]]; then
        say "$corpus: token counts differ: tokenize $ml_tokens of $bytes bytes, tiktoken $js_tokens of $js_bytes, prepare $p_tokens / $c_tokens ($p_docs end-of-text ids)"
        exit 1
      fi
      echo "$corpus,$r,${#files[@]},$bytes,$ml_tokens,$js_tokens,$p_tokens,$p_docs,$js_mbs,$ml_mbs,$p_mbs,$c_mbs,$wall_mbs,$((${#PIN_CMD[@]} > 0)),$cpu,$date,$(load1)" \
        >>"$RES/data_prepare_runs.csv"
    done
  done
fi

# --- the 8 sources of parts 2 and 3 ---------------------------------------------------
# Raw sources are read whole by whoever opens them and GPT-2 tokenized on the
# fly; stdlib_modules is the indexed dataset prepared in part 1. Part 2 weighs
# sources by text size, so that they run out at about the same step (one epoch
# of the mixture is about 10.9M tokens), and also runs an all-indexed control
# (the same 8 sources prepared beforehand: no tokenization in the data path).
# Part 3 weighs them equally, so that in a short run every colocated trainer
# receives samples of (and so opens) every source.
if has_part 1 || has_part 2 || has_part 3; then
  [[ -f $WORK/prepared/python-stdlib.idx ]] || prepare_one python-stdlib >/dev/null
fi
NAMES=(docs_library docs_whatsnew docs_capi docs_other bible fortunes stdlib_pkgs)
PATHS=("$DOCS/library" "$DOCS/whatsnew" "$DOCS/c-api" "$WORK/raw/docs_other.jsonl"
  "$WORK/raw/bible.jsonl" "$WORK/raw/fortunes.jsonl" "$WORK/raw/stdlib_pkgs.jsonl")
FORMATS=(text text text jsonl jsonl jsonl jsonl)
SIZE_WEIGHTS=(6.3 1.7 0.8 2.2 4.3 2.8 6.9 4.8)  # MB of text, stdlib_modules last
# config_head RUN_NAME MODE LOADERS WORKERS: what every generated config
# shares, up to data.workers.
config_head() {
  echo "# generated by scripts/bench/bench_data.sh"
  echo "run: {name: $1, dir: $WORK/run, seed: 1234, timeout: 120}"
  echo "cluster:"
  echo "  roles: {constructors: 1, loaders: $3}"
  echo "model: {vocab_size: 50257, d_model: 64, n_layers: 1, n_heads: 2, n_kv_heads: 1, ffn_dim: 128}"
  echo "plan: {planner: hdp, capacity: 2048}"
  echo "data:"
  echo "  mode: $2"
  echo "  seq_len: 2048"
  echo "  tokens_per_step: 16384"
  echo "  workers: $4"
}
config() {  # name mode loaders workers raw|indexed size|equal [lean|processes]
  local f=$WORK/configs/$1.yaml i w
  {
    config_head bench-data "$2" "$3" "$4"
    if [[ ${7:-} == lean ]]; then echo "  shadows: false"; echo "  cache_tokens: 0"; fi
    # DataLoader-style colocated baseline: `workers` worker processes per trainer
    if [[ ${7:-} == processes ]]; then echo "  colocated_processes: $4"; fi
    echo "  sources:"
    for i in "${!NAMES[@]}"; do
      w=1; [[ $6 == size ]] && w=${SIZE_WEIGHTS[$i]}
      if [[ $5 == raw ]]; then
        echo "    - {name: ${NAMES[$i]}, path: ${PATHS[$i]}, format: ${FORMATS[$i]}, tokenizer: gpt2, weight: $w}"
      else
        echo "    - {name: ${NAMES[$i]}, path: $WORK/prepared/src_${NAMES[$i]}, format: indexed, weight: $w}"
      fi
    done
    w=1; [[ $6 == size ]] && w=${SIZE_WEIGHTS[7]}
    echo "    - {name: stdlib_modules, path: $WORK/prepared/python-stdlib, format: indexed, weight: $w}"
  } >"$f"
  echo "$f"
}
run_data() {  # config np steps report
  local cfg=$1 np=$2 steps=$3 report=$4 log=${4%.json}.log
  rm -f "$report"
  if ! timeout "$TIMEOUT" "${MPIRUN[@]}" -np "$np" "$BIN" data --config "$cfg" --steps "$steps" \
      --report "$report" >"$log" 2>&1; then
    say "FAILED (exit $?): mpirun -np $np $BIN data --config $cfg --steps $steps (log: $log)"
    tail -5 "$log" >&2
    return 1
  fi
}
json_row() {  # report.json -> CSV fields
  $PY - "$1" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
roles = r["roles"]
def g(role, key):
    return roles.get(role, {}).get(key, 0)
print(",".join(str(x) for x in [
    r["mode"], r["constructors"], r["loaders"], r["trainers"], r["steps"], int(r["tokens"]),
    r["seconds"], r["tokens_per_s"], r["hash"],
    g("constructor", "pss_sum_kib"), g("loader", "pss_sum_kib"), g("trainer", "pss_sum_kib"),
    g("constructor", "peak_rss_sum_kib"), g("loader", "peak_rss_sum_kib"),
    g("trainer", "peak_rss_sum_kib"), g("trainer", "peak_rss_max_kib")]))
EOF
}
RUN_HEADER="mode,constructors,loaders,trainers,steps,tokens,seconds,tokens_per_s,hash,constructor_pss_kib,loader_pss_kib,trainer_pss_kib,constructor_peak_rss_kib,loader_peak_rss_kib,trainer_peak_rss_kib,trainer_peak_rss_max_kib,load1"

# --- 2. tokens/s versus loaders ------------------------------------------------------
if has_part 2; then
  for i in "${!NAMES[@]}"; do   # the all-indexed control: the 7 raw sources, prepared
    n=${NAMES[$i]}
    [[ -f $WORK/prepared/src_$n.idx ]] ||
      "$BIN" prepare --input "${PATHS[$i]}" --format "${FORMATS[$i]}" --tokenizer gpt2 \
        --out "$WORK/prepared/src_$n" >/dev/null
  done
  say "2. delivered tokens/s vs loaders ($LOADERS), $TPUT_TRAINERS trainers, $TPUT_STEPS steps, median of $REPS"
  echo "rep,sources,$RUN_HEADER" >"$RES/data_loaders_runs.csv"
  for ((r = 0; r < REPS; ++r)); do   # repetitions outermost: background load spreads over all layouts
    for L in $LOADERS; do
      for variant in raw indexed; do
        cfg=$(config "tput_${variant}_l$L" disaggregated "$L" 1 "$variant" size)
        rep=$WORK/reports/tput_${variant}_l${L}_r$r.json
        run_data "$cfg" $((1 + L + TPUT_TRAINERS)) "$TPUT_STEPS" "$rep"
        echo "$r,$variant,$(json_row "$rep"),$(load1)" >>"$RES/data_loaders_runs.csv"
        say "   rep $r, $L loader(s), $variant: $(sed -n 's/.*"tokens_per_s": *\([0-9.e+]*\).*/\1/p' "$rep") tokens/s"
      done
    done
  done
fi

# --- 3. memory: disaggregated versus colocated -------------------------------------------
if has_part 3; then
  say "3. data path memory (PSS), trainers $MEM_TRAINERS, $MEM_STEPS steps"
  echo "$RUN_HEADER" >"$RES/data_memory_runs.csv"
  for T in $MEM_TRAINERS; do
    cfg=$(config mem_colocated colocated 0 2 raw equal)
    rep=$WORK/reports/mem_t${T}_colocated.json
    run_data "$cfg" $((1 + T)) "$MEM_STEPS" "$rep"
    echo "$(json_row "$rep"),$(load1)" >>"$RES/data_memory_runs.csv"
    cfg=$(config mem_colocated_processes colocated 0 2 raw equal processes)
    rep=$WORK/reports/mem_t${T}_colocated_processes.json
    run_data "$cfg" $((1 + T)) "$MEM_STEPS" "$rep"
    echo "$(json_row "$rep" | sed 's/^colocated,/colocated_processes,/'),$(load1)" >>"$RES/data_memory_runs.csv"
    for L in $MEM_LOADERS; do
      cfg=$(config "mem_l$L" disaggregated "$L" 2 raw equal)
      rep=$WORK/reports/mem_t${T}_l$L.json
      run_data "$cfg" $((1 + L + T)) "$MEM_STEPS" "$rep"
      echo "$(json_row "$rep"),$(load1)" >>"$RES/data_memory_runs.csv"
    done
    for L in $MEM_LEAN_LOADERS; do  # the memory-lean settings: data.shadows false, data.cache_tokens 0
      cfg=$(config "mem_lean_l$L" disaggregated "$L" 2 raw equal lean)
      rep=$WORK/reports/mem_t${T}_lean_l$L.json
      run_data "$cfg" $((1 + L + T)) "$MEM_STEPS" "$rep"
      echo "$(json_row "$rep" | sed 's/^disaggregated,/lean,/'),$(load1)" >>"$RES/data_memory_runs.csv"
    done
    say "   $T trainers done"
  done
  # How the comparison moves in a longer run: colocated trainers keep caching
  # the tokens of the documents they read; loaders already hold theirs.
  if [[ -n $MEM_LONG_STEPS ]]; then
    T=$MEM_LONG_TRAINERS
    rep=$WORK/reports/mem_t${T}_colocated_long.json
    run_data "$(config mem_colocated colocated 0 2 raw equal)" $((1 + T)) "$MEM_LONG_STEPS" "$rep"
    echo "$(json_row "$rep"),$(load1)" >>"$RES/data_memory_runs.csv"
    rep=$WORK/reports/mem_t${T}_colocated_processes_long.json
    run_data "$(config mem_colocated_processes colocated 0 2 raw equal processes)" $((1 + T)) \
      "$MEM_LONG_STEPS" "$rep"
    echo "$(json_row "$rep" | sed 's/^colocated,/colocated_processes,/'),$(load1)" >>"$RES/data_memory_runs.csv"
    for L in 1 2; do
      rep=$WORK/reports/mem_t${T}_l${L}_long.json
      run_data "$(config "mem_l$L" disaggregated "$L" 2 raw equal)" $((1 + L + T)) "$MEM_LONG_STEPS" "$rep"
      echo "$(json_row "$rep"),$(load1)" >>"$RES/data_memory_runs.csv"
    done
    say "   $T trainers, $MEM_LONG_STEPS steps done"
  fi
fi

# --- 4. an image-text source -------------------------------------------------------------
# Two sources of equal mixture weight (tokens): the King James Bible (raw JSON
# Lines, GPT-2 tokenized by the loaders, as in part 2) and IMG_COUNT of Debian's
# openclipart PNGs packed into WebDataset shards (scripts/data/pack_images.py):
# loaders decode each PNG, resize it to at most IMG_MAX_SIDE a side and cut
# 16x16x3 patches; a sample is its patches plus its caption's tokens.
# (a) samples/s and tokens/s versus loaders, 4 trainers; the lead re-partitions
# the loaders by measured seconds per token every 10 steps, and the log says
# how (the image source should get the most). (b) data path memory (part 3's
# definition), disaggregated versus DataLoader-style worker processes that each
# open both sources and decode their own images.
img_config() {  # name mode loaders workers [processes|lean]
  local f=$WORK/configs/$1.yaml
  {
    config_head bench-data-images "$2" "$3" "$4"
    echo "  rebalance_every: 10"
    if [[ ${5:-} == processes ]]; then echo "  colocated_processes: $IMG_MEM_PROCESSES"; fi
    # lean loaders: no shadows, a decoded-image cache that only holds what is prepared ahead
    if [[ ${5:-} == lean ]]; then echo "  shadows: false"; fi
    echo "  image: {max_side: $IMG_MAX_SIDE, patch: 16$([[ ${5:-} == lean ]] && echo ", cache_mib: $IMG_LEAN_CACHE_MIB")}"
    echo "  sources:"
    echo "    - {name: bible, path: $WORK/raw/bible.jsonl, format: jsonl, tokenizer: gpt2, weight: 1}"
    echo "    - {name: clipart, path: \"$WORK/images/clipart$IMG_COUNT-*.tar\", format: webdataset, tokenizer: gpt2, weight: 1}"
  } >"$f"
  echo "$f"
}
img_row() {  # report.json log -> CSV fields (IMG_HEADER)
  $PY - "$1" "$2" <<'EOF'
import json, re, sys
r = json.load(open(sys.argv[1]))
log = open(sys.argv[2], errors="replace").read()
roles = r["roles"]
def g(role, key):
    return roles.get(role, {}).get(key, 0)
# The last re-partition's loaders per source, and the costs it used.
rep = re.findall(r"re-partitioned by measured cost: (.*?) \(seconds per token: (.*?)\)", log)
counts = dict(x.split(":") for x in rep[-1][0].split()) if rep else {}
costs = dict(x.rsplit(" ", 1) for x in rep[-1][1].split(", ")) if rep else {}
ss = r.get("source_samples", {})
print(",".join(str(x) for x in [
    r["mode"], r["constructors"], r["loaders"], r["trainers"], r["steps"], int(r["tokens"]),
    r["seconds"], r["tokens_per_s"], r.get("samples", 0), r.get("samples_per_s", 0),
    ss.get("clipart", 0), ss.get("bible", 0), r["hash"],
    len(rep), counts.get("clipart", ""), counts.get("bible", ""),
    costs.get("clipart", ""), costs.get("bible", ""),
    g("loader", "decodes"), g("loader", "decoded_samples"), g("loader", "decodes_at_read"),
    round(g("loader", "decode_seconds"), 3),
    round(g("loader", "busy_seconds_sum"), 3), round(g("loader", "busy_seconds_max"), 3),
    g("constructor", "pss_sum_kib"), g("loader", "pss_sum_kib"), g("trainer", "pss_sum_kib"),
    g("trainer", "worker_pss_sum_kib"),
    g("constructor", "peak_rss_sum_kib"), g("loader", "peak_rss_sum_kib"),
    g("trainer", "peak_rss_sum_kib"), g("trainer", "peak_rss_max_kib"),
    g("loader", "replies"), g("loader", "reply_bytes")]))
EOF
}
IMG_HEADER="mode,constructors,loaders,trainers,steps,tokens,seconds,tokens_per_s,samples,samples_per_s,image_samples,text_samples,hash,repartitions,clipart_loaders,bible_loaders,clipart_s_per_token,bible_s_per_token,decodes,decoded_samples,decodes_at_read,decode_seconds,loader_busy_s_sum,loader_busy_s_max,constructor_pss_kib,loader_pss_kib,trainer_pss_kib,trainer_worker_pss_kib,constructor_peak_rss_kib,loader_peak_rss_kib,trainer_peak_rss_kib,trainer_peak_rss_max_kib,loader_replies,loader_reply_bytes"
if has_part 4; then
  t4=$(date +%s)
  mkdir -p "$WORK/raw" "$WORK/images"
  [[ -f $WORK/raw/bible.jsonl ]] || $PY scripts/data/corpora.py bible "$WORK/raw/bible.jsonl" >&2
  compgen -G "$WORK/images/clipart$IMG_COUNT-*.tar" >/dev/null ||
    $PY scripts/data/pack_images.py --per-shard 500 --limit "$IMG_COUNT" \
      "$WORK/images/clipart$IMG_COUNT" "$CLIPART" >&2
  say "4a. image + text: samples/s vs loaders ($LOADERS), $TPUT_TRAINERS trainers, $IMG_TPUT_STEPS steps, $IMG_COUNT images (max side $IMG_MAX_SIDE)"
  echo "rep,workers,$IMG_HEADER,load1" >"$RES/data_images_tput_runs.csv"
  for ((r = 0; r < IMG_REPS; ++r)); do
    for L in $LOADERS; do
      cfg=$(img_config "img_tput_l$L" disaggregated "$L" "$IMG_WORKERS")
      rep=$WORK/reports/img_tput_l${L}_r$r.json
      run_data "$cfg" $((1 + L + TPUT_TRAINERS)) "$IMG_TPUT_STEPS" "$rep"
      row=$(img_row "$rep" "${rep%.json}.log")
      echo "$r,$IMG_WORKERS,$row,$(load1)" >>"$RES/data_images_tput_runs.csv"
      IFS=, read -r -a f <<<"$row"
      say "   rep $r, $L loader(s): $(printf %.0f "${f[9]}") samples/s, $(printf %.0f "${f[7]}") tokens/s; loaders clipart:bible ${f[14]:--}:${f[15]:--} after ${f[13]} re-partition(s); ${f[18]} decodes (${f[20]} at read), busiest loader ${f[23]} s"
    done
  done
  say "4b. image + text: data path memory, trainers $IMG_MEM_TRAINERS, $IMG_MEM_STEPS steps"
  echo "$IMG_HEADER,load1" >"$RES/data_images_memory_runs.csv"
  for T in $IMG_MEM_TRAINERS; do
    rep=$WORK/reports/img_mem_t${T}_colocated_processes.json
    run_data "$(img_config img_mem_colocated_processes colocated 0 2 processes)" $((1 + T)) \
      "$IMG_MEM_STEPS" "$rep"
    echo "$(img_row "$rep" "${rep%.json}.log" | sed 's/^colocated,/colocated_processes,/'),$(load1)" \
      >>"$RES/data_images_memory_runs.csv"
    for L in $IMG_MEM_LOADERS; do
      rep=$WORK/reports/img_mem_t${T}_l$L.json
      run_data "$(img_config "img_mem_l$L" disaggregated "$L" 2)" $((1 + L + T)) "$IMG_MEM_STEPS" "$rep"
      echo "$(img_row "$rep" "${rep%.json}.log"),$(load1)" >>"$RES/data_images_memory_runs.csv"
    done
    for L in $IMG_MEM_LEAN_LOADERS; do
      rep=$WORK/reports/img_mem_t${T}_lean_l$L.json
      run_data "$(img_config "img_mem_lean_l$L" disaggregated "$L" 2 lean)" $((1 + L + T)) \
        "$IMG_MEM_STEPS" "$rep"
      echo "$(img_row "$rep" "${rep%.json}.log" | sed 's/^disaggregated,/lean,/'),$(load1)" \
        >>"$RES/data_images_memory_runs.csv"
    done
    say "   $T trainers done"
  done
  say "part 4 took $(($(date +%s) - t4)) s"
fi

# --- tables and plots ----------------------------------------------------------------------
$PY scripts/plot/plot_bench_data.py "$RES" --headline-loaders 2 | tee "$RES/data_tables.md"
echo
echo "CSV: $RES/data_prepare.csv $RES/data_loaders.csv $RES/data_memory.csv $RES/data_images_*.csv (and *_runs.csv); plots: $RES/data_*.png"
echo "bench_data.sh took $(($(date +%s) - t_start)) s (benchmarks: $(($(date +%s) - t_bench)) s)"
