#!/usr/bin/env bash
# The PyTorch peer of the GPU step benchmark (scripts/gpu/torch_peer.py)
# computes meshloom's function: from the parameters of step 0 of a tiny GQA
# model (untied head, as gpu_step_bench) trained by the CPU backend, its loss
# and gradients on steps 0-2's packed documents and its parameters after
# each AdamW step must match meshloom's step dumps
# (scripts/gpu/torch_peer_check.py says how closely). A peer with its RoPE
# pairs or rotation or its RMSNorm changed must fail the same check, so the
# check is known to see them. Skips (77) where no python has torch and h5py.
#   torch_peer_test.sh MESHLOOM MPIEXEC
set -u
meshloom=$1 mpiexec=$2
# shellcheck source=tests/common/testlib.sh
source "$(dirname "$0")/../common/testlib.sh"
check=$root/scripts/gpu/torch_peer_check.py
python=
for p in /usr/bin/python3 python3; do
  if "$p" -c 'import torch, h5py, numpy' 2>/dev/null; then python=$p; break; fi
done
[[ -n $python ]] || { echo "skipped: no python3 with torch, h5py and numpy"; exit 77; }

lr=0.001
head -c 3000 "$root/docs/formats.md" >"$dir/text.txt"
cat >"$dir/c.yaml" <<YAML
run: {timeout: 120, steps: 3}
cluster: {roles: {constructors: 1, loaders: 1}}
model: {vocab_size: 257, d_model: 64, n_layers: 2, n_heads: 4, n_kv_heads: 2, ffn_dim: 128,
        tied_embeddings: false}
optim: {lr: $lr, min_lr: $lr, warmup_steps: 0, grad_clip: 1.0}
data:
  seq_len: 48
  tokens_per_step: 400
  sources: [{name: text, path: $dir/text.txt, format: text, tokenizer: byte}]
log: {metrics: false}
YAML
for step in 0 1 2; do
  timeout 120 "$mpiexec" --oversubscribe --bind-to none -np 3 "$meshloom" train -c "$dir/c.yaml" \
    --set run.dir="$dir/run$step" --dump-step "$step" "$dir/step$step.h5" >"$dir/run$step.txt" 2>&1 ||
    { cat "$dir/run$step.txt"; fail "meshloom train --dump-step $step failed"; }
done
dumps=("$dir/step0.h5" "$dir/step1.h5" "$dir/step2.h5")

"$python" "$check" --lr "$lr" "${dumps[@]}" || fail "torch_peer.py differs from meshloom's step dumps"
for bug in rope_pairs rope_sign norm_center; do
  if "$python" "$check" --lr "$lr" --break "$bug" "${dumps[@]}" >"$dir/break_$bug.txt" 2>&1; then
    cat "$dir/break_$bug.txt"
    fail "the check passes a peer with --break $bug: it would miss that bug"
  fi
  echo "--break $bug: rejected ($(grep -m1 'FAIL' "$dir/break_$bug.txt" | cut -c1-150))"
done
echo "torch_peer.py matches meshloom's step dumps"
