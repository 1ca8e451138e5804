#!/usr/bin/env bash
# Bad data in sources, end to end on a tiny model (a few seconds in all):
#  - token ids outside model.vocab_size: a raw source's tokenizer and an
#    indexed source's first documents (refused in the preflight), and a later
#    document (the loader names the source, file and document): one message
#    and exit 2, not a trainer's internal check mid-run;
#  - an indexed source whose documents are all empty is refused in the
#    preflight, naming the file;
#  - a raw JSONL source with bad lines: a warning with the counts and the
#    first bad lines; an all-bad one says why it holds no document;
#  - an image-text (webdataset) shard with a truncated header, a lone image, a
#    lone caption, a member of another format and an image over max_pixels:
#    one warning counting each and naming the first shards and members; a
#    JPEG damaged past its header: the loader's warning, blank patches; a
#    shard with no usable sample: one message naming it and the first problem;
#  - a long/short policy whose threshold no document reaches is a warning;
#  - a model larger than a node's memory is refused at start-up.
#   bad_sources_test.sh MESHLOOM MPIEXEC
set -u
meshloom=$1 mpiexec=$2
source "$(dirname "$0")/../common/testlib.sh"

# idx PREFIX TOKEN:COUNT...: a uint16 indexed dataset, one document per pair
# (COUNT tokens of id TOKEN).
idx() {
  /usr/bin/python3 - "$@" <<'PY'
import struct, sys
prefix, docs = sys.argv[1], [tuple(map(int, a.split(':'))) for a in sys.argv[2:]]
n = len(docs)
with open(prefix + '.idx', 'wb') as f:
    f.write(b'MMIDIDX\0\0' + struct.pack('<QBQQ', 1, 8, n, n + 1))
    f.write(struct.pack('<%di' % n, *[c for _, c in docs]))
    ptr = [2 * sum(c for _, c in docs[:i]) for i in range(n)]
    f.write(struct.pack('<%dq' % n, *ptr) + struct.pack('<%dq' % (n + 1), *range(n + 1)))
with open(prefix + '.bin', 'wb') as f:
    for t, c in docs: f.write(struct.pack('<H', t) * c)
PY
}
idx "$dir/ok" $(for i in $(seq 40); do echo "$((60 + i)):$((50 + 10 * i))"; done)
# 70000 good tokens first (the preflight reads the first 65536), then bad ones.
idx "$dir/late" 65:70000 $(for i in $(seq 30); do echo "60000:100"; done)
idx "$dir/empty" 65:0 65:0 65:0
printf '%s\n' '{"text": "good line one"}' '{not json' '{"body": "no text"}' '{"text": 12}' \
  '[1, 2]' '{"text": "good line two"}' >"$dir/mixed.jsonl"
printf '{"text": "bad \xff utf8"}\n' >>"$dir/mixed.jsonl"
printf '{oops\n{"text": ""}\n' >"$dir/allbad.jsonl"
cat >"$dir/c.yaml" <<YAML
run: {dir: $dir/run, steps: 3, timeout: 30, peak_gflops: 10}
cluster: {roles: {constructors: 1, loaders: 1}}
model: {vocab_size: 260, d_model: 32, n_layers: 1, n_heads: 2, n_kv_heads: 2, ffn_dim: 64}
data:
  seq_len: 256
  tokens_per_step: 512
  sources: [{name: s, path: $dir/ok}]
plan: {capacity: 256}
checkpoint: {every: 0}
YAML

train() {  # expected-rc args...
  local want=$1; shift
  local start=$SECONDS
  timeout 60 "$mpiexec" --oversubscribe --bind-to none -np 4 "$meshloom" train -c "$dir/c.yaml" \
    "$@" >"$dir/out.txt" 2>&1
  local rc=$?
  ((rc == want)) || { cat "$dir/out.txt"; fail "rc=$rc (want $want) for $*"; }
  ((SECONDS - start < 20)) || fail "took $((SECONDS - start)) s for $*"
}
bad() {  # expect args...
  local expect=$1; shift
  train 2 "$@"
  grep -qF -- "$expect" "$dir/out.txt" || { cat "$dir/out.txt"; fail "message lacks: $expect"; }
  (($(grep -c '^meshloom: error' "$dir/out.txt") == 1)) || { cat "$dir/out.txt"; fail "not one message"; }
  echo "ok: $(grep '^meshloom: error' "$dir/out.txt")"
}
warned() {  # expect args...
  local expect=$1; shift
  train 0 "$@"
  grep -qF -- "$expect" "$dir/out.txt" || { cat "$dir/out.txt"; fail "no warning: $expect"; }
  echo "ok: $(grep -F -- "$expect" "$dir/out.txt" | head -1)"
}

src() { echo "data.sources=[{name: s, path: $dir/$1${2:+, format: $2, tokenizer: byte}}]"; }
bad "source 's' ($dir/ok.bin) document 19: token 80 is outside model.vocab_size 80" \
  --set model.vocab_size=80
bad "source 's': tokenizer 'byte' has 257 ids, more than model.vocab_size 200" \
  --set "$(src mixed.jsonl jsonl)" --set model.vocab_size=200
bad "source 's' ($dir/late.bin) document " --set "$(src late)"
grep -q "document [1-9][0-9]*: token 60000 is outside model.vocab_size 260" "$dir/out.txt" ||
  fail "the loader did not name the bad document"
bad "source 's': indexed dataset '$dir/empty' holds 3 documents, all empty" --set "$(src empty)"
bad "'$dir/allbad.jsonl' holds no document: 1 unreadable (first: $dir/allbad.jsonl:1: not valid JSON" \
  --set "$(src allbad.jsonl jsonl)"
warned "source 's': 4 of 7 items in $dir/mixed.jsonl skipped as unreadable" --set "$(src mixed.jsonl jsonl)"
grep -qF "$dir/mixed.jsonl:2: not valid JSON" "$dir/out.txt" || fail "the first bad line is not named"
grep -qF "source 's': invalid UTF-8 in 1 of 3 documents of $dir/mixed.jsonl" "$dir/out.txt" ||
  { cat "$dir/out.txt"; fail "no invalid UTF-8 warning"; }
# Image-text shards (tests/data/images): every bad case beside good samples.
/usr/bin/python3 - "$root/tests/data/images" "$dir" <<'PY'
import io, sys, tarfile
images, out = sys.argv[1], sys.argv[2]
jpeg = open(f"{images}/hopper_171x200.jpg", "rb").read()
png = open(f"{images}/hopper_palette_64x75.png", "rb").read()
def shard(name, members):
    with tarfile.open(f"{out}/{name}", "w") as t:
        for key, data in members:
            info = tarfile.TarInfo(key)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
shard("pics-0.tar", [("good.png", png), ("good.txt", b"a palette hopper"),
                     ("bad.jpg", b"\xff\xd8\xff\xe0 then garbage, no JPEG"), ("bad.txt", b"corrupt"),
                     ("lonely.png", png),
                     ("words.txt", b"no picture"),
                     ("anim.gif", b"GIF89a"), ("anim.txt", b"x")])
shard("pics-1.tar", [("big.jpg", jpeg), ("big.txt", b"over max_pixels"),
                     ("cut.jpg", jpeg[:len(jpeg) * 6 // 10]), ("cut.txt", b"cut after its header"),
                     ("fine.jpg", jpeg), ("fine.txt", b"a hopper")])
shard("none.tar", [("x.jpg", b"not a jpeg"), ("x.txt", b"caption")])
PY
pics() { echo "data.sources=[{name: s, path: $dir/ok}, {name: pics, path: '$1', format: webdataset, tokenizer: byte}]"; }
warned "source 'pics' ($dir/pics-*.tar): 4 samples, 4 images; skipped: 1 truncated image, 1 image without caption, 2 captions without image, 1 member of an unsupported format" \
  --set "$(pics "$dir/pics-*.tar")" --set data.image.max_side=32 --set data.image.patch=8
grep -qF "$dir/pics-0.tar:bad.jpg" "$dir/out.txt" || { cat "$dir/out.txt"; fail "the truncated image is not named"; }
grep -qF "pics-1.tar:cut image 0 passed the header check but does not decode" "$dir/out.txt" ||
  { cat "$dir/out.txt"; fail "no warning for the JPEG damaged past its header"; }
warned "3 images over max_pixels" --set "$(pics "$dir/pics-*.tar")" --set data.image.max_pixels=20000 \
  --set data.image.max_side=32 --set data.image.patch=8
bad "source 'pics': '$dir/none.tar' holds no image-text sample: 0 samples, 0 images; skipped: 1 image neither JPEG nor PNG" \
  --set "$(pics "$dir/none.tar")"
warned "no document is longer than data.long_policy.threshold 100000 (the longest seen has 450 tokens)" \
  --set data.long_policy.threshold=100000 --set data.long_policy.share=0.5
(($(grep -c 'long_policy' "$dir/out.txt") == 1)) || fail "the long/short warning is not once"
# Not the data, but the same start-up check: a model no node could hold
# (16M-token vocabulary x 4096) is refused before anything is allocated.
bad "of memory (fp32 weights and gradients, AdamW moments, the logits of 256 tokens and the LM head's gradient), so the 2 trainers on" \
  --set model.vocab_size=16000000 --set model.d_model=4096 --set model.n_heads=32 --set model.n_kv_heads=32
echo "bad sources test passed"
