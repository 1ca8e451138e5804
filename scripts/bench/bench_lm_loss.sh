#!/usr/bin/env bash
# bench_lm_loss.sh: the fused, chunked LM head and loss (lib/model/lm_loss.hpp)
# against the plain one that held the whole micro-batch's [n, V] logits, on
# the model of bench_step.sh part 1 (d 512, 8 layers, ffn 1376, V 50257,
# 2 threads), one micro-batch of 4096 and of 16384 tokens:
#  - peak RSS (/usr/bin/time -v) of a 1-trainer `meshloom train` (one step on
#    the Python docs as bytes; its largest process is the trainer) and of
#    bench/model_bench (the model alone: weights, gradients, activations);
#  - model_bench's best forward + backward, its LM head + cross-entropy time
#    and tokens/s, in CPU time / threads: the machine is shared, and wall
#    clock (the training run's step time too) moved by 1.5x between runs.
# Prints a markdown table, also written to bench/results/lm_loss.md, rows to
# bench/results/lm_loss.csv. About 13 minutes on the 2-core machine.
#
#   scripts/bench/bench_lm_loss.sh OLD_BUILD [NEW_BUILD]
# Each build folder holds app/meshloom and bench/model_bench; OLD_BUILD is a
# build of a commit before the fused loss (e.g. 057ece6: `git worktree add
# /tmp/old 057ece6`, then configure and build those two targets there).
# NEW_BUILD defaults to $BUILD_DIR or build. TOKENS="4096" runs fewer sizes.
set -euo pipefail
cd "$(dirname "$0")/../.."
old=${1:?"usage: bench_lm_loss.sh OLD_BUILD [NEW_BUILD]"}
new=${2:-${BUILD_DIR:-build}}
TOKENS=${TOKENS:-4096 16384}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for b in "$old" "$new"; do
  [[ -x $b/app/meshloom && -x $b/bench/model_bench ]] ||
    { echo "bench_lm_loss: $b/app/meshloom or $b/bench/model_bench missing" >&2; exit 1; }
done
out=bench/results
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$new/app/meshloom" prepare --input /usr/share/doc/python3.11/html/_sources --format text \
  --tokenizer byte --out "$work/pydocs" >/dev/null
max_rss_kib() { awk -F': ' '/Maximum resident set size/ {print $2}' "$1"; }

csv=$out/lm_loss.csv
echo "version,tokens,train_rss_kib,bench_rss_kib,bench_step_cpu_s,bench_head_loss_cpu_s" >"$csv"
for n in $TOKENS; do
  for version in old new; do
    build=$old
    [[ $version == new ]] && build=$new
    cat >"$work/c.yaml" <<YAML
run: {steps: 1, threads: 2, timeout: 900, seed: 1234, dir: $work/run_$version$n}
cluster: {roles: {constructors: 1, loaders: 0}}
model: {vocab_size: 50257, d_model: 512, n_layers: 8, n_heads: 8, n_kv_heads: 8, ffn_dim: 1376}
data:
  mode: colocated
  seq_len: $n
  tokens_per_step: $n
  sources: [{name: pydocs, path: $work/pydocs, format: indexed}]
plan: {capacity: $n}
log: {metrics: true}
YAML
    /usr/bin/time -v -o "$work/train_time.txt" timeout 1200 mpirun --oversubscribe --bind-to none \
      -np 2 "$build/app/meshloom" train --config "$work/c.yaml" >"$work/train.log" 2>&1 ||
      { tail -20 "$work/train.log" >&2; exit 1; }
    tokens=$(/usr/bin/python3 -c '
import json, sys
print(next(r for r in map(json.loads, open(sys.argv[1])) if "step" in r)["trainers"][0]["tokens"])' \
      "$work/run_$version$n/metrics.jsonl")
    [[ $tokens == "$n" ]] || { echo "bench_lm_loss: the trainer's micro-batch had $tokens tokens, not $n" >&2; exit 1; }
    /usr/bin/time -v -o "$work/bench_time.txt" "$build/bench/model_bench" tokens="$n" d=512 layers=8 \
      heads=8 kv_heads=8 ffn=1376 vocab=50257 threads=2 iters=2 >"$work/bench.txt" 2>&1
    read -r step head_loss < <(/usr/bin/python3 -c '
import re, sys
text = open(sys.argv[1]).read()
cpu = min(float(x) for x in re.findall(r"iteration [1-9]\d*: .*cpu-time/threads ([0-9.]+) s", text))
k = re.search(r"by kind \(cpu-time/threads\): .*LM head ([0-9.]+) s, cross-entropy ([0-9.]+) s", text)
print(f"{cpu:.3f} {float(k.group(1)) + float(k.group(2)):.3f}")' "$work/bench.txt")
    echo "$version,$n,$(max_rss_kib "$work/train_time.txt"),$(max_rss_kib "$work/bench_time.txt"),$step,$head_loss" >>"$csv"
  done
done

/usr/bin/python3 - "$csv" <<'PY' | tee "$out/lm_loss.md"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
gib = lambda kib: f"{int(kib) / 2**20:.2f} GiB"
print("| tokens | LM loss | peak RSS, `meshloom train` (trainer) | peak RSS, model_bench | "
      "model_bench step (CPU time) | LM head + loss (CPU time) | tokens/s (model_bench, CPU time) |")
print("| ---: | --- | ---: | ---: | ---: | ---: | ---: |")
for r in rows:
    name = "plain, [n, V] logits" if r["version"] == "old" else "fused, chunks of 512"
    step = float(r["bench_step_cpu_s"])
    print(f"| {r['tokens']} | {name} | {gib(r['train_rss_kib'])} | {gib(r['bench_rss_kib'])} | "
          f"{step:.2f} s | {float(r['bench_head_loss_cpu_s']):.2f} s | "
          f"{int(r['tokens']) / step:.0f} |")
PY
