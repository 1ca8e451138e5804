#!/usr/bin/env bash
# bench_step_gpu.sh (also `scripts/bench/bench_step.sh --gpu`): the CUDA backend on
# one GPU, the CUDA issue's acceptance figures:
#   1. the attention kernels (kernels/device/attention): forward and backward TFLOP/s
#      on a packed 32K-token micro-batch of long-tail documents, H 16, D 128
#      (target: forward >= 350 TFLOP/s, FlashAttention-2's level on H100);
#   2. the whole step (kernels/host/model, kernels/host/train): forward, backward,
#      gradient norm and AdamW of a ~1B-parameter model (d 2048, 16 layers,
#      ffn 5504, V 50257) at 32K tokens, model FLOPs over the step's wall time
#      against the bf16 dense peak (target: MFU >= 45%);
#   3. the same step in PyTorch (scripts/gpu/torch_peer.py: the same model,
#      batch, optimizer and FLOP count, as a user would write it), beside
#      meshloom's, where a python3 has torch with CUDA.
# Prints markdown tables; writes bench/results/step_gpu.csv (with the commit
# measured), step_gpu.png and the raw outputs (step_gpu_*.txt). Exits 0 with a
# message where there is no GPU.
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
  # The PyTorch peer's output: in bundles from the peer on (older ones lack it).
  if [[ -s $RAW/step_gpu_torch.txt ]]; then
    cp "$RAW/step_gpu_torch.txt" "$out/"
  else
    echo "torch_peer: not in $RAW" >"$out/step_gpu_torch.txt"
  fi
  gpu=$(head -1 "$RAW/gpu.txt")
  date=$(date -u -r "$RAW/step_gpu_model.txt" +%Y-%m-%dT%H:%M:%SZ)
  commit=$(sed -n 's/^bundle built from commit //p' "$RAW/summary.md" 2>/dev/null | head -1)
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
  commit=$(git rev-parse --short=12 HEAD)
  git diff --quiet HEAD || commit+=" with uncommitted changes"
  "$BUILD/kernels/device/attention_bench" --heads 16 --kv-heads 16 --dim 128 --iters 20 |
    tee "$out/step_gpu_attention.txt"
  "$BUILD/bench/gpu_step_bench" tokens="$TOKENS" layers="$LAYERS" iters=5 |
    tee "$out/step_gpu_model.txt"
  # The PyTorch peer: 77 (no torch or no CUDA) and failures leave their line.
  py=
  for p in python3 /usr/bin/python3; do
    if "$p" -c 'import torch' >/dev/null 2>&1; then py=$p; break; fi
  done
  if [[ -n $py ]]; then
    "$py" scripts/gpu/torch_peer.py --tokens "$TOKENS" --layers "$LAYERS" 2>&1 |
      tee "$out/step_gpu_torch.txt" || true
  else
    echo "torch_peer: skipped: no python3 with torch here" | tee "$out/step_gpu_torch.txt"
  fi
fi
commit=${commit:-unknown}

fwd=$(sed -n 's/^forward *: *[0-9.]* ms *\([0-9.]*\) TFLOP\/s.*/\1/p' "$out/step_gpu_attention.txt")
bwd=$(sed -n 's/^backward *: *[0-9.]* ms *\([0-9.]*\) TFLOP\/s.*/\1/p' "$out/step_gpu_attention.txt")
# Which forward the default is (wgmma on an sm_90), and the other families by
# name for comparison: mma.sync (FlashAttention-2's design) and WMMA.
fwd_kernel=$(sed -n 's/^forward kernel: *//p' "$out/step_gpu_attention.txt")
fwd_mma=$(sed -n 's/^forward (mma.sync kernel): *[0-9.]* ms *\([0-9.]*\) TFLOP\/s.*/\1/p' "$out/step_gpu_attention.txt")
bwd_mma=$(sed -n 's/^backward (mma.sync kernel): *[0-9.]* ms *\([0-9.]*\) TFLOP\/s.*/\1/p' "$out/step_gpu_attention.txt")
fwd_wmma=$(sed -n 's/^forward (WMMA kernel): *[0-9.]* ms *\([0-9.]*\) TFLOP\/s.*/\1/p' "$out/step_gpu_attention.txt")
bwd_wmma=$(sed -n 's/^backward (WMMA kernel): *[0-9.]* ms *\([0-9.]*\) TFLOP\/s.*/\1/p' "$out/step_gpu_attention.txt")
# kv KEY [FILE]: the first KEY=value of a key=value output (default meshloom's step).
kv() { tr ' ' '\n' <"${2:-$out/step_gpu_model.txt}" | sed -n "s/^$1=//p" | head -1; }
tkv() { kv "$1" "$out/step_gpu_torch.txt"; }
[[ -z $(kv tokens) ]] || TOKENS=$(kv tokens)  # what was measured, here or elsewhere
mfu=$(kv mfu)
[[ -n $mfu ]] || mfu=$(kv mfu_measured_peak)
tmfu=$(tkv mfu)
[[ -n $tmfu ]] || tmfu=$(tkv mfu_measured_peak)
per_second() { awk -v t="$TOKENS" -v s="$1" 'BEGIN { if (s > 0) printf "%.0f", t / s }'; }
{
  echo "metric,value,target,device,date,commit"
  row() { echo "$1,$2,$3,$gpu,$date,$commit"; }
  row attention_forward_tflops "$fwd" 350
  row attention_backward_tflops "$bwd" ""
  row attention_forward_mma_tflops "$fwd_mma" ""
  row attention_backward_mma_tflops "$bwd_mma" ""
  row attention_forward_wmma_tflops "$fwd_wmma" ""
  row attention_backward_wmma_tflops "$bwd_wmma" ""
  row step_tflops "$(kv tflops)" ""
  row step_mfu "$mfu" 0.45
  row step_seconds "$(kv step_seconds)" ""
  row step_tokens_per_second "$(per_second "$(kv step_seconds)")" ""
  row step_forward_backward_seconds "$(kv forward_backward_seconds)" ""
  row step_forward_seconds "$(kv forward_seconds)" ""
  row step_optimizer_seconds "$(kv optimizer_seconds)" ""
  row params_billion "$(kv params | tr -d B)" ""
  row measured_bf16_peak_tflops "$(kv measured_peak_tflops)" ""
  row torch_step_tflops "$(tkv tflops)" ""
  row torch_step_mfu "$tmfu" ""
  row torch_step_seconds "$(tkv step_seconds)" ""
  row torch_step_tokens_per_second "$(tkv tokens_per_second)" ""
  row torch_measured_bf16_peak_tflops "$(tkv measured_peak_tflops)" ""
  row torch_version "$(tkv torch)" ""
  row torch_attention "$(tkv attention)" ""
  row torch_compile "$(tkv compile)" ""
} >"$out/step_gpu.csv"
/usr/bin/python3 scripts/plot/plot_step_gpu.py "$out/step_gpu.csv" "$out/step_gpu.png"

# meshloom's step beside the PyTorch peer's: the same model, batch and FLOPs.
step_table() {
  local pct='BEGIN { if (m != "") printf "%.1f%%", 100 * m; else printf "n/a" }'
  local ms='BEGIN { if (s != "") printf "%.1f", 1000 * s; else printf "n/a" }'
  if [[ -z $(tkv tflops) ]]; then
    echo "PyTorch peer: not measured ($(grep -m1 '^torch_peer:' "$out/step_gpu_torch.txt" || tail -1 "$out/step_gpu_torch.txt"))"
    return
  fi
  echo "| step, $(kv params) parameters, $TOKENS tokens | meshloom | PyTorch $(tkv torch) ($(tkv attention) attention, compile $(tkv compile)) |"
  echo "| --- | ---: | ---: |"
  echo "| ms / step | $(awk -v s="$(kv step_seconds)" "$ms") | $(awk -v s="$(tkv step_seconds)" "$ms") |"
  echo "| tokens / s | $(per_second "$(kv step_seconds)") | $(tkv tokens_per_second) |"
  echo "| TFLOP/s | $(kv tflops) | $(tkv tflops) |"
  echo "| MFU (of $(kv published_peak_tflops) TFLOP/s) | $(awk -v m="$(kv mfu)" "$pct") | $(awk -v m="$(tkv mfu)" "$pct") |"
  echo "| MFU of the measured bf16 peak | $(awk -v m="$(kv mfu_measured_peak)" "$pct") of $(kv measured_peak_tflops) | $(awk -v m="$(tkv mfu_measured_peak)" "$pct") of $(tkv measured_peak_tflops) |"
  echo "| meshloom / PyTorch, TFLOP/s | $(awk -v a="$(kv tflops)" -v b="$(tkv tflops)" 'BEGIN { if (b > 0) printf "%.2fx", a / b }') | |"
}

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
step_table
echo
echo "Commit: $commit. CSV: $out/step_gpu.csv; plot: $out/step_gpu.png"
