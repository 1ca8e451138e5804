#!/usr/bin/env bash
# bench_step_gpu.sh (also `scripts/bench/bench_step.sh --gpu`): the CUDA backend on
# one GPU, the CUDA issue's acceptance figures:
#   1. the attention kernels (cuda/kernels/attention): forward and backward TFLOP/s
#      on a packed 32K-token micro-batch of long-tail documents, H 16, D 128
#      (target: forward >= 350 TFLOP/s, FlashAttention-2's level on H100);
#   2. the whole step (cuda/model, cuda/train): forward, backward,
#      gradient norm and AdamW of a ~1B-parameter model (d 2048, 16 layers,
#      ffn 5504, V 50257) at 32K tokens, model FLOPs over the step's wall time
#      against the bf16 dense peak (target: MFU >= 45%).
# Prints a markdown table; writes bench/results/step_gpu.csv, step_gpu.png and
# the raw outputs (step_gpu_*.txt). Exits 0 with a message where there is no GPU.
#
#   scripts/bench/bench_step_gpu.sh
#   TOKENS=16384 LAYERS=8 scripts/bench/bench_step_gpu.sh     a smaller model
#   RAW=DIR scripts/bench/bench_step_gpu.sh    table, CSV and plot from outputs measured
#                                        elsewhere (build-bundle/run.sh bench, see
#                                        scripts/gpu/gpu_bundle.sh)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD_DIR:-build}
TOKENS=${TOKENS:-32768}
LAYERS=${LAYERS:-16}
out=bench/results

mkdir -p "$out"
if [[ -n ${RAW:-} ]]; then
  # Outputs measured elsewhere (build-bundle/run.sh bench on a GPU machine).
  for f in step_gpu_attention.txt step_gpu_model.txt gpu.txt; do
    [[ -s $RAW/$f ]] || { echo "bench_step_gpu: $RAW/$f is missing or empty" >&2; exit 1; }
  done
  cp "$RAW/step_gpu_attention.txt" "$RAW/step_gpu_model.txt" "$out/"
  gpu=$(head -1 "$RAW/gpu.txt")
  date=$(date -u -r "$RAW/step_gpu_model.txt" +%Y-%m-%dT%H:%M:%SZ)
  echo "# bench_step_gpu.sh: outputs of $RAW, measured on $gpu, $date"
else
  # The GPU first, so that a machine without one is told at once, not after a build.
  if ! nvidia-smi -L >/dev/null 2>&1; then
    echo "bench_step_gpu: no GPU here (nvidia-smi lists none): nothing to measure" \
      "(RAW=DIR turns outputs measured elsewhere into the table)"
    exit 0
  fi
  [[ -f $BUILD/build.ninja ]] || scripts/setup.sh
  cmake --build "$BUILD" --target attention_bench gpu_step_bench >/dev/null ||
    { echo "bench_step_gpu: attention_bench / gpu_step_bench do not build (a CPU-only build?)" >&2; exit 1; }
  date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
  echo "# bench_step_gpu.sh on $gpu, $date"
  "$BUILD/kernels/attention/attention_bench" --heads 16 --kv-heads 16 --dim 128 --iters 20 |
    tee "$out/step_gpu_attention.txt"
  "$BUILD/bench/gpu_step_bench" tokens="$TOKENS" layers="$LAYERS" iters=5 |
    tee "$out/step_gpu_model.txt"
fi

fwd=$(sed -n 's/^forward *: *[0-9.]* ms *\([0-9.]*\) TFLOP\/s.*/\1/p' "$out/step_gpu_attention.txt")
bwd=$(sed -n 's/^backward *: *[0-9.]* ms *\([0-9.]*\) TFLOP\/s.*/\1/p' "$out/step_gpu_attention.txt")
# Which forward the default is (wgmma on an sm_90), and the other families by
# name for comparison: mma.sync (FlashAttention-2's design) and WMMA.
fwd_kernel=$(sed -n 's/^forward kernel: *//p' "$out/step_gpu_attention.txt")
fwd_mma=$(sed -n 's/^forward (mma.sync kernel): *[0-9.]* ms *\([0-9.]*\) TFLOP\/s.*/\1/p' "$out/step_gpu_attention.txt")
bwd_mma=$(sed -n 's/^backward (mma.sync kernel): *[0-9.]* ms *\([0-9.]*\) TFLOP\/s.*/\1/p' "$out/step_gpu_attention.txt")
fwd_wmma=$(sed -n 's/^forward (WMMA kernel): *[0-9.]* ms *\([0-9.]*\) TFLOP\/s.*/\1/p' "$out/step_gpu_attention.txt")
bwd_wmma=$(sed -n 's/^backward (WMMA kernel): *[0-9.]* ms *\([0-9.]*\) TFLOP\/s.*/\1/p' "$out/step_gpu_attention.txt")
kv() { tr ' ' '\n' <"$out/step_gpu_model.txt" | sed -n "s/^$1=//p" | head -1; }
mfu=$(kv mfu)
[[ -n $mfu ]] || mfu=$(kv mfu_measured_peak)
{
  echo "metric,value,target,device,date"
  echo "attention_forward_tflops,$fwd,350,$gpu,$date"
  echo "attention_backward_tflops,$bwd,,$gpu,$date"
  echo "attention_forward_mma_tflops,$fwd_mma,,$gpu,$date"
  echo "attention_backward_mma_tflops,$bwd_mma,,$gpu,$date"
  echo "attention_forward_wmma_tflops,$fwd_wmma,,$gpu,$date"
  echo "attention_backward_wmma_tflops,$bwd_wmma,,$gpu,$date"
  echo "step_tflops,$(kv tflops),,$gpu,$date"
  echo "step_mfu,$mfu,0.45,$gpu,$date"
  echo "step_seconds,$(kv step_seconds),,$gpu,$date"
  echo "step_forward_backward_seconds,$(kv forward_backward_seconds),,$gpu,$date"
  echo "step_forward_seconds,$(kv forward_seconds),,$gpu,$date"
  echo "step_optimizer_seconds,$(kv optimizer_seconds),,$gpu,$date"
  echo "params_billion,$(kv params | tr -d B),,$gpu,$date"
  echo "measured_bf16_peak_tflops,$(kv measured_peak_tflops),,$gpu,$date"
} >"$out/step_gpu.csv"
/usr/bin/python3 scripts/plot/plot_step_gpu.py "$out/step_gpu.csv" "$out/step_gpu.png"

echo
echo "| $gpu, $date | measured | target |"
echo "| --- | ---: | ---: |"
echo "| attention forward ($fwd_kernel), 32K tokens, H 16, D 128 | $fwd TFLOP/s | 350 TFLOP/s |"
echo "| attention backward | $bwd TFLOP/s | |"
echo "| (mma.sync kernels: forward, backward) | $fwd_mma, $bwd_mma TFLOP/s | |"
echo "| (WMMA kernels: forward, backward) | $fwd_wmma, $bwd_wmma TFLOP/s | |"
echo "| step, $(kv params) parameters, $TOKENS tokens | $(kv tflops) TFLOP/s, MFU $(awk -v m="$mfu" 'BEGIN{printf "%.1f%%", 100*m}') | 45% |"
echo "| (step: forward, backward, optimizer) | $(kv forward_seconds), $(awk -v a="$(kv forward_backward_seconds)" -v b="$(kv forward_seconds)" 'BEGIN{ if (b != "") printf "%.4f", a - b }'), $(kv optimizer_seconds) s | |"
echo
echo "CSV: $out/step_gpu.csv; plot: $out/step_gpu.png"
