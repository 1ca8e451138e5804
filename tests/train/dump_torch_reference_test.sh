#!/usr/bin/env bash
# Step dumps against an independent torch implementation of the model
# (scripts/data/torch_reference.py): the loss and every gradient of step 1 of
# a tiny model trained on text and on the test images (tests/data/images,
# packed into a WebDataset shard), with one trainer and with four trainers
# whose capacity splits samples, image positions included, over CP rings;
# samples cut inside an image; text only; an untied head; TP and PP rings.
# The reference must also reject each bug it can plant (--break), so the
# check is known to have teeth. Fails, never skips, without torch
# (python3-torch, scripts/setup.sh).
#   dump_torch_reference_test.sh MESHLOOM MPIEXEC
set -u
meshloom=$1 mpiexec=$2
# shellcheck source=tests/common/testlib.sh
source "$(dirname "$0")/../common/testlib.sh"
python=/usr/bin/python3
reference=$root/scripts/data/torch_reference.py
$python -c 'import torch, h5py' || fail "python3-torch or python3-h5py missing (scripts/setup.sh)"

$python "$root/scripts/data/pack_images.py" "$dir/shards/shard" "$root/tests/data/images" ||
  fail "pack_images.py"
src=/usr/share/doc/python3.11/html/_sources/library/argparse.rst.txt
[[ -f $src ]] || fail "python3.11-doc missing"
head -c 1500 "$src" >"$dir/text.txt"

# config SOURCES: a 2-layer GQA model, byte tokenizer, samples of at most 48
# tokens (a fitted image is at most 4 x 4 patches of 8 x 8).
config() {
  cat <<YAML
run: {timeout: 120, steps: 2}
cluster: {roles: {constructors: 1, loaders: 1}}
model: {vocab_size: 257, d_model: 64, n_layers: 2, n_heads: 4, n_kv_heads: 2, ffn_dim: 128}
data:
  seq_len: 48
  tokens_per_step: 400
  image: {max_side: 32, patch: 8}
  sources: $1
log: {metrics: false}
YAML
}
text="{name: text, path: $dir/text.txt, format: text, tokenizer: byte}"
images="{name: images, path: '$dir/shards/shard-*.tar', format: webdataset, tokenizer: byte, weight: 2}"
config "[$text, $images]" >"$dir/images.yaml"
config "[$text]" >"$dir/text.yaml"

# run NAME CONFIG TRAINERS ARGS...: trains 2 steps and dumps step 1 to $dir/NAME.h5.
run() { train_dump "$1" "$2" "$3" 1 "${@:4}"; }

# check NAME ARGS...: the torch reference on the dump.
check() {
  echo "== $1"
  $python "$reference" "$dir/$1.h5" || fail "$1: the dump differs from the torch reference"
}

run img1 images 1 --set plan.capacity=4096
run img4 images 4 --set plan.capacity=16
$python - "$dir/img1.h5" "$dir/img4.h5" <<'PY' || fail "the image runs' dumps lack images or differ"
import sys, h5py, numpy as np
a, b = (h5py.File(f, "r") for f in sys.argv[1:])
assert (a["batch/tokens"][()] == -1).sum() > 0, "no image position in the batch"
lengths = a["batch/sample_lengths"][()]
starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
split = [n for s, n in zip(starts, lengths) if n > 16 and a["batch/tokens"][s] == -1]
assert split, "no sample with images longer than plan.capacity 16 (split over a ring)"
for k in ("batch/tokens", "batch/patches", "batch/sample_lengths"):
    assert np.array_equal(a[k][()], b[k][()]), k
PY
check img1
check img4
# Samples of 12: a document's image positions continue in its next sample,
# which then starts in the middle of the image.
run short3 images 3 --set data.seq_len=12 --set plan.capacity=4 --set data.tokens_per_step=200
check short3
run text4 text 4 --set plan.capacity=16
check text4
run untied2 images 2 --set plan.capacity=24 --set model.tied_embeddings=false
check untied2
# Scaled RoPE (llama3: with D 16 and theta 10000 one frequency of each pair is
# kept, one blended and the rest divided) and another RMSNorm epsilon.
run scaled text 2 --set plan.capacity=24 --set model.rope_scaling.type=llama3 \
  --set model.rope_scaling.factor=4 --set model.rope_scaling.original_max_position_embeddings=64 \
  --set model.rms_norm_eps=1e-3
check scaled
# Tensor and pipeline parallelism with images, in rings of two HDP ranks:
# only TP rank 0 (stage 0) embeds the patches; the dump takes each HDP rank's
# batch once.
run tp2_ring2 images 4 --set parallel.tp=2 --set plan.capacity=24
check tp2_ring2
run pp2_ring2 images 4 --set parallel.pp=2 --set plan.capacity=24
check pp2_ring2

for bug in rope patch image_predicts mask gqa; do
  if $python "$reference" --break "$bug" "$dir/img4.h5" >"$dir/break_$bug.txt" 2>&1; then
    cat "$dir/break_$bug.txt"
    fail "the reference with --break $bug still passes: the check would miss that bug"
  fi
  echo "--break $bug: rejected ($(grep '^loss' "$dir/break_$bug.txt"); $(tail -1 "$dir/break_$bug.txt"))"
done
echo "step dumps match the torch reference"
