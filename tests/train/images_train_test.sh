#!/usr/bin/env bash
# Training on text mixed with images, on 8 ranks (1 constructor, 2 loaders,
# 5 trainers) as the images quickstart runs (configs/quickstart_images.yaml),
# on the committed test images packed into a WebDataset shard:
#  - the run ends, the log names the image source, and the loss on its
#    captions (metrics.jsonl "source_loss"; image positions predict nothing)
#    falls: the last 5 steps' mean is below the first 5 steps' by 10% or more;
#  - stopped after the checkpoint of step 19 and resumed (the lengths and
#    image counts restored from the checkpoint), the run continues with the
#    same data and losses within 1e-6;
#  - the batches, patches included, are the same through 2 loaders and a
#    constructor (patches as 8-bit pixels on the wire) as read in place, and
#    the loaders' replies take a byte a patch value.
#   images_train_test.sh MESHLOOM MPIEXEC
set -u
meshloom=$1 mpiexec=$2
# shellcheck source=tests/common/testlib.sh
source "$(dirname "$0")/../common/testlib.sh"
# shellcheck source=tests/train/train_runs.sh
source "$(dirname "$0")/train_runs.sh"
pack_test_images img
cat >"$dir/c.yaml" <<YAML
run: {timeout: 120, steps: 40}
cluster: {roles: {constructors: 1, loaders: 2}}
model: {vocab_size: 257, d_model: 64, n_layers: 2, n_heads: 4, n_kv_heads: 2, ffn_dim: 160}
optim: {lr: 6.0e-3, min_lr: 6.0e-4, warmup_steps: 5}
plan: {capacity: 512}
data:
  seq_len: 1024
  tokens_per_step: 2048
  sources:
    - {name: docs, path: $dir/docs, weight: 1}
    - {name: pictures, path: "$dir/shards/img-*.tar", format: webdataset, tokenizer: byte, weight: 1}
  image: {max_side: 64, patch: 8}
checkpoint: {every: 10, keep: 5}
YAML
train full 8
grep -q "source pictures   8 image-text samples (webdataset" "$dir/full.log" ||
  { cat "$dir/full.log"; fail "the image source is not in the log"; }
grep "loss by source" "$dir/full.log"
/usr/bin/python3 - "$dir/full/metrics.jsonl" <<'PY' || fail "the caption loss did not fall"
import json, sys
steps = [json.loads(l) for l in open(sys.argv[1]) if '"step"' in l]
cap = [s["source_loss"]["pictures"] for s in steps if "pictures" in s["source_loss"]]
assert len(cap) >= 30, f"captions predicted in only {len(cap)} steps"
first, last = sum(cap[:5]) / 5, sum(cap[-5:]) / 5
print(f"caption loss: first 5 steps {first:.3f}, last 5 steps {last:.3f}")
assert last < 0.9 * first, (first, last)
PY
train cut 8 --stop-at 22
train cut 8 --resume auto
grep -q "document lengths restored" "$dir/cut.log" || { cat "$dir/cut.log"; fail "no lengths restored"; }
same_losses full cut 20 1e-6 || fail "the resumed run differs"
# Patches that travel (loader -> constructor -> trainer, as 8-bit pixels:
# wire/patch_wire.hpp) are the patches a trainer cuts itself (colocated):
# the batch hash covers every patch value, bit for bit.
for mode in disaggregated colocated; do
  set -- --set cluster.roles.loaders=2 --report "$dir/data.json" --dump "$dir/data.h5"
  [[ $mode == colocated ]] && set -- --set data.mode=colocated --set cluster.roles.loaders=0
  timeout 60 "$mpiexec" --oversubscribe --bind-to none -np 6 "$meshloom" data -c "$dir/c.yaml" \
    --steps 10 "$@" >"$dir/data-$mode.txt" 2>&1 || { cat "$dir/data-$mode.txt"; fail "meshloom data, $mode"; }
done
hash=$(sed -n 's/^batch hash: //p' "$dir/data-disaggregated.txt")
[[ -n $hash && $hash == $(sed -n 's/^batch hash: //p' "$dir/data-colocated.txt") ]] ||
  fail "patches through loaders differ from patches read in place: $(grep -h 'batch hash' "$dir"/data-*.txt)"
echo "ok: the same batches, patches included, through loaders and in place (hash $hash)"
# The loaders' replies hold 4 bytes a token and a byte a patch value (plus
# the padding's runs and a few counts a reply), not 4 bytes a value.
/usr/bin/python3 - "$dir/data.json" "$dir/data.h5" <<'PY' || fail "the loaders' reply bytes"
import json, sys
import h5py
loaders = json.load(open(sys.argv[1]))["roles"]["loader"]
images, values = h5py.File(sys.argv[2], "r")["patches"].shape
tokens, sent, replies = loaders["tokens"], loaders["reply_bytes"], loaders["replies"]
least = 4 * tokens + images * values
most = 4 * tokens + 1.1 * images * values + 64 * replies
print(f"loaders sent {sent} bytes in {replies} replies: {tokens} tokens, {images} patches of "
      f"{values} values (as float32: {4 * tokens + 4 * images * values})")
assert images > 0 and least <= sent <= most, (least, sent, most)
PY
echo "images train test passed"
