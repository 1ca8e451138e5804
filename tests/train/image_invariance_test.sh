#!/usr/bin/env bash
# Parallelism invariance with image-text samples: a batch mixing text with
# the committed test images (packed into a WebDataset shard, patches of 8 x 8
# x 3, images resized to fit 48 px: up to 36 image positions a sample) gives
# the same loss and gradients (relative error <= 1e-5) on 2 to 4 trainers as
# on one, image samples cut over CP rings included, with tensor and pipeline
# parallelism and Ulysses attention; the batch, patches included, is the
# same. Also: every image position of the dump is a patch (its row in
# /batch/patches), and the loss counts no image position's prediction.
#   image_invariance_test.sh MESHLOOM MPIEXEC
set -u
meshloom=$1 mpiexec=$2
# shellcheck source=tests/common/testlib.sh
source "$(dirname "$0")/../common/testlib.sh"
# shellcheck source=tests/train/invariance_cases.sh
source "$(dirname "$0")/invariance_cases.sh"
prepare_docs docs 'a*'
pack_test_images img
cat >"$dir/c.yaml" <<YAML
run: {timeout: 120, steps: 1, dir: $dir/run}
cluster: {roles: {constructors: 1, loaders: 1}}
model: {vocab_size: 257, d_model: 32, n_layers: 2, n_heads: 8, n_kv_heads: 4, ffn_dim: 64}
data:
  seq_len: 160
  tokens_per_step: 900
  sources:
    - {name: docs, path: $dir/docs, weight: 1}
    - {name: pictures, path: "$dir/shards/img-*.tar", format: webdataset, tokenizer: byte, weight: 2}
  image: {max_side: 48, patch: 8}
log: {metrics: false}
YAML
run() {  # name trainers extra-args...
  invariance_run "$@" || { cat "$dir/$1.txt"; fail "$1 exited non-zero"; }
}
run ref 1 --set plan.capacity=4096
/usr/bin/python3 - "$dir/ref.h5" <<'PY' || fail "the reference dump's image positions"
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
tokens, lengths = f["batch/tokens"][()], f["batch/sample_lengths"][()]
patches = f["batch/patches"][()]
images = int((tokens == -1).sum())
assert images > 0, "no image sample in the step"
assert patches.shape == (images, 3 * 8 * 8), (patches.shape, images)
assert np.abs(patches).max() <= 1.0
assert np.abs(f["grads/patch_embed"][()]).max() > 0, "patch_embed got no gradient"
# Each sample's image positions lead it; hdp4 (capacity 48) must cut one
# image sample over a ring: HDP splits exactly the samples longer than that.
at, longest = 0, 0
for n in lengths:
    s = tokens[at:at + n]
    k = int((s == -1).sum())
    assert (s[:k] == -1).all(), "an image position after a caption token"
    if k:
        longest = max(longest, n)
    at += n
assert longest > 48, f"no image sample longer than 48 tokens (longest {longest})"
print(f"ok: {images} image positions in {len(lengths)} samples; longest image sample {longest}")
PY
cases=(
  "hdp2      2 1e-5 --set plan.capacity=128"
  "hdp4      4 1e-5 --set plan.capacity=48"
  "static3   3 1e-5 --set plan.planner=static --set plan.capacity=64"
  "tp2_ring2 4 1e-5 --set parallel.tp=2 --set plan.capacity=80"
  "pp2_ring2 4 1e-5 --set parallel.pp=2 --set plan.capacity=80"
  "uly2      2 1e-5 --set plan.cp_algorithm=ulysses --set plan.capacity=80"
)
for case in "${cases[@]}"; do
  invariance_case "$case"
  run "$case_name" "$case_trainers" "${case_args[@]}"
  invariance_compare /usr/bin/python3 "$root/scripts/data/compare_dumps.py" "$case_name" \
    "$case_tol" "${case_args[@]}" || fail "$case_name: differs from the one-trainer reference"
done
echo "image invariance test passed"
