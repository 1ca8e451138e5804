#!/usr/bin/env bash
# The CUDA backend is a module loaded on first use, so that ranks without a
# GPU do not map cuBLAS (about 85 MiB each):
#   1. meshloom itself does not link cuBLAS, cuBLASLt, the CUDA runtime or NCCL;
#   2. a bare meshloom process stays small (PSS under 60 MiB);
#   3. a dry run with run.backend: cuda loads the module and prints the NCCL
#      and CUDA runtime versions;
#   4. a module that cannot be loaded is one clear error naming it, exit 2,
#      when a trainer needs it.
#   cuda_module_test.sh MESHLOOM MPIEXEC
set -u
meshloom=$1 mpiexec=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
mkdir "$dir/text"
for i in 1 2 3 4 5 6 7 8; do printf 'document %d: %0300d\n' "$i" 0 >"$dir/text/doc$i.txt"; done
cat >"$dir/cuda.yaml" <<YAML
run: {backend: cuda, steps: 1, timeout: 30}
cluster: {roles: {constructors: 1, loaders: 1}}
model: {vocab_size: 257, d_model: 128, n_layers: 1, n_heads: 2, n_kv_heads: 2, ffn_dim: 256}
data:
  seq_len: 256
  tokens_per_step: 512
  sources: [{name: text, path: $dir/text, format: text, tokenizer: byte}]
plan: {capacity: 256}
YAML
cuda_cfg=(--config "$dir/cuda.yaml")

libs=$(ldd "$meshloom")
grep -Eq 'libcublas|libcudart|libnccl' <<<"$libs" && fail "meshloom links CUDA libraries: $libs"
[[ -f $(dirname "$meshloom")/libmeshloom_cuda.so ]] || fail "no libmeshloom_cuda.so beside $meshloom"

mkfifo "$dir/fifo"
"$meshloom" tokenize --tokenizer byte "$dir/fifo" >/dev/null 2>&1 &
pid=$!
sleep 1
pss=$(awk '/^Pss:/ {print $2}' "/proc/$pid/smaps_rollup")
echo x >"$dir/fifo"
wait "$pid"
echo "bare meshloom process: PSS $pss KiB"
((pss < 60 * 1024)) || fail "a bare meshloom process holds $pss KiB (PSS)"

timeout 60 "$mpiexec" --oversubscribe --bind-to none -np 5 "$meshloom" train "${cuda_cfg[@]}" \
  --set run.dir="$dir/run" --dry-run >"$dir/dry.txt" 2>&1 || { cat "$dir/dry.txt"; fail "dry run failed"; }
grep -E '^# backend: cuda \(built with CUDA: NCCL [0-9]+\.[0-9]+\.[0-9]+, CUDA runtime [0-9]+\.[0-9]+' \
  "$dir/dry.txt" || { cat "$dir/dry.txt"; fail "the dry run did not load the CUDA module"; }

timeout 60 "$mpiexec" --oversubscribe --bind-to none -x MESHLOOM_CUDA_MODULE="$dir/missing.so" -np 5 \
  "$meshloom" train "${cuda_cfg[@]}" --set run.dir="$dir/run2" >"$dir/bad.txt" 2>&1
rc=$?
grep -q "error \[rank [0-9]*\]: run.backend: cuda: cannot load the CUDA backend $dir/missing.so" "$dir/bad.txt" ||
  { cat "$dir/bad.txt"; fail "no clear message for a missing module"; }
((rc != 0)) || fail "exit code 0 with a missing module"
echo "PASS"
