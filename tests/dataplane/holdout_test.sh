#!/usr/bin/env bash
# The held-out split (eval.holdout, dataplane/holdout.hpp) over a long data
# run: `meshloom data --dump` over about three epochs of two JSONL sources
# never delivers a held-out document (recomputed here from the documented
# hash, independently of meshloom), delivers every other one, and gives the
# same samples with 1 and 3 loaders; a training run stopped and resumed gets
# the same data as an uninterrupted one.
#   holdout_test.sh MESHLOOM MPIEXEC
set -u
meshloom=$1 mpiexec=$2
# shellcheck source=tests/common/testlib.sh
source "$(dirname "$0")/../common/testlib.sh"
python=/usr/bin/python3
src=/usr/share/doc/python3.11/html/_sources/library/argparse.rst.txt
[[ -f $src ]] || fail "python3.11-doc missing"
# Two sources of short documents: 300 and 200 lines of the argparse docs.
$python - "$src" "$dir" <<'PY' || fail "writing the sources"
import json, sys
lines = [l for l in open(sys.argv[1]).read().split("\n") if len(l.strip()) > 20]
for name, n in (("alpha", 300), ("beta", 200)):
    with open(f"{sys.argv[2]}/{name}.jsonl", "w") as f:
        for i in range(n):
            f.write(json.dumps({"text": lines[i % len(lines)] + f" ({name} {i})"}) + "\n")
PY
cat >"$dir/c.yaml" <<YAML
run: {timeout: 120, steps: 40}
cluster: {roles: {constructors: 1, loaders: 1}}
model: {vocab_size: 257, d_model: 32, n_layers: 1, n_heads: 2, n_kv_heads: 2, ffn_dim: 64}
data:
  seq_len: 128
  tokens_per_step: 1024
  sources:
    - {name: alpha, path: $dir/alpha.jsonl, format: jsonl, tokenizer: byte}
    - {name: beta, path: $dir/beta.jsonl, format: jsonl, tokenizer: byte}
eval: {holdout: 0.25}
log: {metrics: true}
YAML
for loaders in 1 3; do
  timeout 120 "$mpiexec" --oversubscribe --bind-to none -np $((2 + loaders)) "$meshloom" data \
    -c "$dir/c.yaml" --set cluster.roles.loaders=$loaders --steps 60 --dump "$dir/l$loaders.h5" \
    >"$dir/l$loaders.txt" 2>&1 || { cat "$dir/l$loaders.txt"; fail "meshloom data, $loaders loader(s)"; }
done
$python - "$dir/l1.h5" "$dir/l3.h5" <<'PY' || fail "the held-out split"
import sys
import h5py, numpy as np
MASK = (1 << 64) - 1
def splitmix64(x):
    z = (x + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)
def fnv1a64(text):
    h = 1469598103934665603
    for c in text.encode():
        h = ((h ^ c) * 1099511628211) & MASK
    return h
def held_out(name, doc, share):
    return splitmix64(fnv1a64(name) ^ doc) < int(share * 2.0**64)
a, b = (h5py.File(f, "r") for f in sys.argv[1:])
for k in ("samples/source", "samples/doc", "samples/offset", "samples/epoch", "tokens"):
    assert np.array_equal(a[k][()], b[k][()]), f"{k}: 1 and 3 loaders differ"
source, doc, epoch = a["samples/source"][()], a["samples/doc"][()], a["samples/epoch"][()]
for i, (name, n) in enumerate((("alpha", 300), ("beta", 200))):
    held = {d for d in range(n) if held_out(name, d, 0.25)}
    seen = set(doc[source == i].tolist())
    assert not seen & held, f"{name}: held-out documents trained on: {sorted(seen & held)[:5]}"
    assert seen == set(range(n)) - held, f"{name}: {n - len(held) - len(seen)} documents never seen"
    print(f"{name}: {len(held)} of {n} documents held out, none delivered; the other "
          f"{len(seen)} delivered, epochs up to {epoch[source == i].max()}")
assert epoch.max() >= 2, "the run did not reach a third epoch"
PY
# A stopped and resumed run gets the data of an uninterrupted one.
train() {
  timeout 300 "$mpiexec" --oversubscribe --bind-to none -np 3 "$meshloom" train -c "$dir/c.yaml" \
    --set run.dir="$dir/$1" --set checkpoint.every=5 "${@:2}" >>"$dir/$1.txt" 2>&1 ||
    { cat "$dir/$1.txt"; fail "train $1"; }
}
train full
train cut --stop-at 17
train cut --resume auto
# Steps the resume repeats (after its checkpoint) must repeat their data too.
diff <(metrics_table full | cut -d' ' -f1,2) <(metrics_table cut | cut -d' ' -f1,2 | sort -n -u) ||
  fail "the resumed run's data differs"
echo "held-out split: never delivered, the same with 1 and 3 loaders and across a resume"
