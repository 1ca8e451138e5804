#!/usr/bin/env bash
# bench_step.sh: the CPU trainer's step, measured (the trainer issue's acceptance).
#  1. MFU of one trainer's forward + backward against the measured sgemm peak,
#     d 512, 8 layers, GPT-2 vocabulary, 4096 tokens: bench/model_bench (one
#     micro-batch, best of 3) and a 1-trainer `meshloom train` on real text
#     (GPT-2 tokens), wall clock and CPU time;
#  2. HDP vs the static DP x CP grid: measured step time on the same real
#     batches (data_hash equal at every step), 4 trainers, C = 2048 < seq_len
#     8192, so long samples need CP rings;
#  3. the planner's cost model against reality at 4, 8 and 16 ranks (NPS):
#     calibrate (`meshloom plan --calibrate`) on one run's k = 1 micro-batches,
#     train again with another seed and `plan.calibration`, compare every
#     trainer's predicted and measured compute time per step; three layouts
#     (trainers oversubscribing the cores with and without CP rings, and one
#     trainer per core).
# Prints markdown tables (also in bench/results/step_tables.md); writes
# bench/results/step_*.csv and step.png. About 7 minutes (408 s) on the
# 2-core machine, once built; docs/bench_step.md explains the results.
#
#   scripts/bench/bench_step.sh                    everything
#   PARTS="1 2" scripts/bench/bench_step.sh        some parts
#   NPS="4 8" scripts/bench/bench_step.sh          other rank counts for part 3 (4 is needed
#                                            for the one-trainer-per-core and sharing rows)
#   KEEP=1 scripts/bench/bench_step.sh             keep the run folders (metrics.jsonl, logs)
#   scripts/bench/bench_step.sh --gpu              the CUDA backend instead (scripts/bench/bench_step_gpu.sh)
set -euo pipefail
cd "$(dirname "$0")/../.."
[[ ${1:-} != --gpu ]] || exec scripts/bench/bench_step_gpu.sh
start=$(date +%s)
BUILD=${BUILD_DIR:-build}
MESHLOOM=$BUILD/app/meshloom
PARTS=${PARTS:-1 2 3}
NPS=${NPS:-4 8 16}
STEPS=${STEPS:-6}  # parts 2 and 3: steps per run; steps 0-1 are not counted
PY=/usr/bin/python3
tool() { "$PY" scripts/bench/bench_step.py "$@"; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# Build: setup.sh from nothing; otherwise bring the two targets up to date.
if [[ ! -f $BUILD/build.ninja ]]; then
  scripts/setup.sh
else
  cmake --build "$BUILD" --target meshloom model_bench >/dev/null ||
    { echo "bench_step: build failed (someone editing?); retry in a minute" >&2; exit 1; }
fi
# Real text: GPT-2 tokens (part 1) and the same text as bytes (parts 2, 3:
# longer sequences, vocabulary 257, so attention is a large share of the work).
[[ -f data/prepared/pydocs.idx && -f data/prepared/fortunes.idx ]] || scripts/data/prepare_data.sh >/dev/null
[[ -f data/bench_step/pydocs.idx && -f data/bench_step/bible.idx && -f data/bench_step/fortunes.idx ]] ||
  TOKENIZER=byte OUT=data/bench_step scripts/data/prepare_data.sh >/dev/null

out=bench/results
mkdir -p "$out"
work=$(mktemp -d)
if [[ ${KEEP:-0} == 1 ]]; then echo "run folders kept in $work"; else trap 'rm -rf "$work"' EXIT; fi
tables=$out/step_tables.md
: >"$tables"
say() { printf '%s\n' "$*" | tee -a "$tables"; }
elapsed() { echo $(($(date +%s) - start)); }
run() {  # name np config sets...: one `meshloom train`
  local name=$1 np=$2 cfg=$3; shift 3
  timeout 600 mpirun --oversubscribe --bind-to none -np "$np" "$MESHLOOM" train --config "$cfg" \
    --set run.dir="$work/$name" "$@" >"$work/$name.log" 2>&1 ||
    { echo "bench_step: run $name failed:" >&2; tail -20 "$work/$name.log" >&2; exit 1; }
}
say "# bench_step.sh, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'))"
say ""
say "Load when it started: load average $(cut -d' ' -f1-3 /proc/loadavg), cores busy with other work $(tool busy 2)."

# ---------------------------------------------------------------------------
if [[ " $PARTS " == *" 1 "* ]]; then
  busy=$(tool busy 2)
  "$BUILD/bench/model_bench" tokens=4096 d=512 layers=8 heads=8 kv_heads=8 ffn=1376 vocab=50257 \
    threads=2 iters=3 >"$out/step_model_bench.txt" 2>&1
  cat >"$work/mfu.yaml" <<YAML
run: {steps: 4, threads: 2, timeout: 600, seed: 1234}
cluster: {roles: {constructors: 1, loaders: 0}}
model: {vocab_size: 50257, d_model: 512, n_layers: 8, n_heads: 8, n_kv_heads: 8, ffn_dim: 1376}
data:
  mode: colocated
  seq_len: 4096
  tokens_per_step: 4096
  sources: [{name: pydocs, path: $PWD/data/prepared/pydocs, format: indexed}]
plan: {capacity: 4096}
YAML
  tool watch --rank 1 --metrics "$work/mfu/metrics.jsonl" --out "$work/mfu_watch.csv" -- \
    timeout 600 mpirun --oversubscribe --bind-to none -np 2 "$MESHLOOM" train --config "$work/mfu.yaml" \
    --set run.dir="$work/mfu" >"$work/mfu.log" 2>&1 || { tail -20 "$work/mfu.log"; exit 1; }
  say ""
  say "## 1. One trainer's step: d 512, 8 layers, 8 heads, ffn 1376, V 50257 (51.0M parameters), 4096 tokens, 2 threads"
  say ""
  say "Other work kept $busy cores busy just before (load average $(cut -d' ' -f1-3 /proc/loadavg) after)."
  say ""
  tool mfu --bench "$out/step_model_bench.txt" --train "$work/mfu/metrics.jsonl" \
    --watch "$work/mfu_watch.csv" --threads 2 --out "$out/step_mfu.csv" | tee -a "$tables"
  say ""
  say "(part 1 done at $(elapsed) s)"
fi

# Parts 2 and 3: a small model on real text as bytes (pydocs, bible, fortunes).
cat >"$work/b.yaml" <<YAML
run: {timeout: 600, seed: 1234}
cluster: {roles: {constructors: 1, loaders: 1}}
model: {vocab_size: 257, d_model: 256, n_layers: 2, n_heads: 4, n_kv_heads: 4, ffn_dim: 704}
data:
  seq_len: 4096
  sources:
    - {name: pydocs, path: $PWD/data/bench_step/pydocs, format: indexed, weight: 2}
    - {name: bible, path: $PWD/data/bench_step/bible, format: indexed, weight: 1}
    - {name: fortunes, path: $PWD/data/bench_step/fortunes, format: indexed, weight: 1}
plan: {capacity: 2048}
YAML

# ---------------------------------------------------------------------------
if [[ " $PARTS " == *" 2 "* ]]; then
  busy=$(tool busy 1)
  for p in hdp static; do
    run "p2_$p" 6 "$work/b.yaml" --set plan.planner=$p --set data.seq_len=8192 \
      --set data.tokens_per_step=16384 --set run.steps="$STEPS"
  done
  tool hdp --hdp "$work/p2_hdp/metrics.jsonl" --static "$work/p2_static/metrics.jsonl" \
    --out "$out/step_hdp_static.csv"
  say ""
  say "Part 2 layout: 6 ranks = 1 constructor + 1 loader + 4 trainers (1 thread each, 2 per core);"
  say "d 256, 2 layers, V 257; 16384-token steps of pydocs:bible:fortunes 2:1:1, seq_len 8192, C 2048"
  say "(static: CP 4 x DP 1). Other work kept $busy cores busy before the two runs."
fi

# ---------------------------------------------------------------------------
if [[ " $PARTS " == *" 3 "* ]]; then
  rm -f "$out/step_costmodel.csv" "$out/step_costmodel_points.csv" "$out"/step_calibration_*.{csv,fit}
  # The calibration run has C = seq_len, so its k = 1 micro-batches cover
  # every sample length up to seq_len (with C < seq_len the longest samples
  # only ever run in rings, and the fit would extrapolate their attention).
  validate() {  # layout np trainers calibration-np busy sets...
    local lay=$1 np=$2 t=$3 cnp=$4 busy=$5; shift 5
    run "v_${lay}_$np" "$np" "$work/b.yaml" --set run.steps="$STEPS" --set run.seed=99 \
      --set plan.calibration="$PWD/$out/step_calibration_$cnp.csv" "$@"
    tool errors --layout "$lay" --ranks "$np" --trainers "$t" --fit "$out/step_calibration_$cnp.fit" \
      --metrics "$work/v_${lay}_$np/metrics.jsonl" --points "$out/step_costmodel_points.csv" \
      --rows "$out/step_costmodel.csv" --load "$busy"
  }
  declare -A load
  for np in $NPS; do
    t=$((np - 2))
    busy=$(tool busy 1)
    load[$np]=$busy
    run "c_$np" "$np" "$work/b.yaml" --set run.steps="$STEPS" --set data.tokens_per_step=$((2048 * t)) \
      --set plan.capacity=4096
    tool calib "$work/c_$np/metrics.jsonl" --out "$out/step_calibration_$np.csv"
    "$MESHLOOM" plan --calibrate "$out/step_calibration_$np.csv" | tee "$out/step_calibration_$np.fit" >/dev/null
    validate rings "$np" "$t" "$np" "$busy" --set data.tokens_per_step=$((2048 * t))
    validate whole "$np" "$t" "$np" "$busy" --set data.tokens_per_step=$((2048 * t)) --set plan.capacity=4096
    if ((np == 4)); then  # 2 trainers on 2 cores: the first row of the one-trainer-per-core layout too
      tool errors --layout 2trainers --ranks 4 --trainers 2 --fit "$out/step_calibration_4.fit" \
        --metrics "$work/v_rings_4/metrics.jsonl" --points "$out/step_costmodel_points.csv" \
        --rows "$out/step_costmodel.csv" --load "$busy"
    fi
    echo "(part 3: $np ranks done at $(elapsed) s)"
  done
  # One trainer per core at more ranks (the others loaders), with the
  # calibration taken at 4 ranks: does it carry over? And, after the fact,
  # the oversubscribed runs predicted from the same 4-rank calibration with
  # the 2 cores shared fairly among the trainers still computing.
  if [[ " $NPS " == *" 4 "* ]]; then
    for np in $NPS; do
      for lay in rings whole; do
        tool errors --layout "$lay+sharing" --ranks "$np" --trainers $((np - 2)) --cores 2 \
          --fit "$out/step_calibration_4.fit" --metrics "$work/v_${lay}_$np/metrics.jsonl" \
          --points "$out/step_costmodel_points.csv" --rows "$out/step_costmodel.csv" --load "${load[$np]}"
      done
    done
    for np in $NPS; do
      ((np == 4)) && continue
      validate 2trainers "$np" 2 4 "$(tool busy 1)" --set cluster.roles.loaders=$((np - 3)) \
        --set data.tokens_per_step=4096
    done
  fi
  echo "(part 3 done at $(elapsed) s)"
fi

say ""
rparts=""
for p in 2 3; do [[ " $PARTS " == *" $p "* ]] && rparts+="$p "; done
[[ -n $rparts ]] && tool report --dir "$out" --parts "$rparts" | tee -a "$tables"
say "Load when it ended: load average $(cut -d' ' -f1-3 /proc/loadavg). Run time $(elapsed) s."
echo "wrote $tables, $out/step_*.csv, $out/step.png"
