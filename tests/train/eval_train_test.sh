#!/usr/bin/env bash
# Evaluation while training (eval.every), end to end on real text with the
# quickstart's model shape (train_runs.sh), a held-out tenth of the docs:
#  - the held-out loss after steps 4 and 9 is the same, within 1e-5
#    relative, for 1 trainer, 4 trainers (HDP: the held-out pieces of 1024
#    tokens split over rings of 2 at plan.capacity 512) and the static grid;
#  - evaluating changes nothing of the training: the same data hashes and
#    bit-identical losses as the same run without eval.every;
#  - the loss by position (metrics.jsonl and eval_positions.csv) and by
#    source sum back to the total, token-weighted;
#  - a run stopped after step 7 and resumed evaluates after step 9 as the
#    uninterrupted run;
#  - meshloom eval on the run's checkpoint gives its held-out loss (2
#    trainers; tp 2 and pp 2 within 1e-5), and runs at twice the trained
#    length;
#  - bad input is one message naming the key, exit 2: eval.every without
#    eval.holdout, meshloom eval on a checkpoint of another model shape,
#    without a held-out split or with an empty one, at a length the layout
#    cannot hold;
#  - meshloom eval --hf DIR gives its import-hf weights file's loss;
#  - eval.sources (weight 0) is evaluated alone and never trained on.
#   eval_train_test.sh MESHLOOM MPIEXEC
set -u
meshloom=$1 mpiexec=$2
# shellcheck source=tests/common/testlib.sh
source "$(dirname "$0")/../common/testlib.sh"
# shellcheck source=tests/train/train_runs.sh
source "$(dirname "$0")/train_runs.sh"

held_out=(--set eval.holdout=0.1 --set run.steps=10)
evaluate=("${held_out[@]}" --set eval.every=5 --set eval.tokens=3000)
train one 4 "${evaluate[@]}" --set plan.capacity=1024
train hdp 7 "${evaluate[@]}"
train static 7 "${evaluate[@]}" --set plan.planner=static
train plain 7 "${held_out[@]}"
train cut 7 "${evaluate[@]}" --stop-at 8
train cut 7 "${evaluate[@]}" --resume auto
grep -q "eval after step 4: held-out loss" "$dir/hdp.log" || { cat "$dir/hdp.log"; fail "no eval line"; }
grep -q "held-out loss .* -> " "$dir/hdp.log" || { cat "$dir/hdp.log"; fail "no held-out summary"; }

/usr/bin/python3 - "$dir" <<'PY' || fail "held-out losses"
import csv, json, sys
d = sys.argv[1]
def rows(run):
    out = {}
    for line in open(f"{d}/{run}/metrics.jsonl"):
        r = json.loads(line)
        if "step" in r: out[r["step"]] = r  # a resumed step: the later row
    return out
runs = {name: rows(name) for name in ["one", "hdp", "static", "plain", "cut"]}
evals = {name: {s: r["eval"] for s, r in rs.items() if "eval" in r} for name, rs in runs.items()}
assert sorted(evals["hdp"]) == [4, 9], sorted(evals["hdp"])
assert not evals["plain"], "eval rows without eval.every"
worst = {}
for name in ["one", "static", "cut"]:
    for s in [4, 9]:
        a, b = evals["hdp"][s], evals[name][s]
        assert a["predictions"] == b["predictions"], (name, s)
        rel = abs(a["loss"] - b["loss"]) / a["loss"]
        assert rel <= 1e-5, f"{name} step {s}: held-out loss {b['loss']} vs {a['loss']} ({rel:.2g})"
        worst[name] = max(worst.get(name, 0), rel)
# Evaluating leaves training alone: same data, the same loss bits.
for s, r in runs["plain"].items():
    assert r["data_hash"] == runs["hdp"][s]["data_hash"] and r["loss"] == runs["hdp"][s]["loss"], s
for s, e in evals["hdp"].items():
    assert 2900 <= e["tokens"] <= 3000 and e["predictions"] < e["tokens"], e
    pos = e["position_loss"]
    assert [p[0] for p in pos] == [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512], pos
    assert sum(p[2] for p in pos) == e["predictions"]
    total = sum(p[1] * p[2] for p in pos) / e["predictions"]
    assert abs(total - e["loss"]) <= 1e-9 * e["loss"], (total, e["loss"])
    assert pos[-1][2] > 0, "no prediction past position 512: no piece long enough for a ring"
    assert abs(e["source_loss"]["docs"] - e["loss"]) <= 1e-9 * e["loss"]
with open(f"{d}/hdp/eval_positions.csv") as f:
    table = list(csv.DictReader(f))
assert len(table) == 2 * 11, len(table)
for row in table:
    e = evals["hdp"][int(row["step"])]
    p = next(p for p in e["position_loss"] if p[0] == int(row["first_position"]))
    assert int(row["predictions"]) == p[2] and abs(float(row["loss"]) - p[1]) <= 1e-7 * p[1], row
print("held-out loss after step 9:", round(evals["hdp"][9]["loss"], 6), "; worst relative difference "
      "from 4 trainers (HDP):", {n: f"{w:.2g}" for n, w in worst.items()})
PY

# meshloom eval on the step-9 checkpoint, 2 trainers: the training run's
# held-out loss after step 9; at --seq-len 2048 (longer than trained, rings
# of 2 at plan.capacity 1024) its buckets reach 1024.
evaluate_ckpt() {  # NAME ARGS... (ranks: $ranks, default 5)
  local name=$1
  shift
  timeout 120 "$mpiexec" --oversubscribe --bind-to none -np "${ranks:-5}" "$meshloom" eval -c "$dir/c.yaml" \
    --checkpoint "$dir/hdp/ckpt/step_00000009.h5" --set eval.holdout=0.1 --tokens 3000 \
    --out "$dir/$name" --report "$dir/$name.json" "$@" >"$dir/$name.log" 2>&1 ||
    { cat "$dir/$name.log"; fail "meshloom eval $name failed"; }
}
evaluate_ckpt again
evaluate_ckpt longer --seq-len 2048 --set plan.capacity=1024
ranks=6 evaluate_ckpt tp2 --set parallel.tp=2 --set cluster.roles.loaders=1
ranks=6 evaluate_ckpt pp2 --set parallel.pp=2 --set cluster.roles.loaders=1
/usr/bin/python3 - "$dir" <<'PY' || fail "meshloom eval"
import json, sys
d = sys.argv[1]
trained = [json.loads(l) for l in open(f"{d}/hdp/metrics.jsonl") if '"eval"' in l][-1]["eval"]
again = json.load(open(f"{d}/again.json"))
rel = abs(again["loss"] - trained["loss"]) / trained["loss"]
assert rel <= 1e-6 and again["predictions"] == trained["predictions"], (again["loss"], trained["loss"])
for layout in ("tp2", "pp2"):  # 2 HDP ranks of 2 trainers: the same held-out loss
    other = json.load(open(f"{d}/{layout}.json"))
    assert abs(other["loss"] - again["loss"]) <= 1e-5 * again["loss"], (layout, other["loss"])
longer = json.load(open(f"{d}/longer.json"))
assert longer["seq_len"] == 2048 and longer["position_loss"][-1][0] == 1024, longer["position_loss"]
assert sum(p[2] for p in longer["position_loss"]) == longer["predictions"]
print(f"meshloom eval: the training run's held-out loss within {rel:.2g}; at 2048: {longer['loss']:.4f}")
PY
# eval.sources: a source of weight 0 held out whole: the evaluations see it
# alone, training never does.
prepare_docs held '[d-e]*'
sed "s|sources: \[{name: docs, path: \(.*\)}\]|sources: [{name: docs, path: \1}, {name: held, path: $dir/held, weight: 0}]|" \
  "$dir/c.yaml" >"$dir/c_sources.yaml"
grep -q "name: held" "$dir/c_sources.yaml" || fail "no held source in the config"
timeout 300 "$mpiexec" --oversubscribe --bind-to none -np 7 "$meshloom" train -c "$dir/c_sources.yaml" \
  --set run.dir="$dir/only" --set run.steps=10 --set eval.every=5 --set eval.tokens=2000 \
  --set "eval.sources=[held]" >"$dir/only.log" 2>&1 || { cat "$dir/only.log"; fail "eval.sources run"; }
/usr/bin/python3 - "$dir/only/metrics.jsonl" <<'PY' || fail "eval.sources"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"step"' in l]
evals = [r["eval"] for r in rows if "eval" in r]
assert len(evals) == 2 and all(set(e["source_loss"]) == {"held"} and e["tokens"] == 2000
                               for e in evals), evals
assert not any("held" in r["source_loss"] for r in rows), "training saw the evaluation-only source"
print("eval.sources: evaluated alone, never trained on")
PY

# A Hugging Face model (--hf DIR) and its import-hf weights file give the
# same held-out loss, bit for bit; the model keys come from config.json.
/usr/bin/python3 "$root/tests/data/make_hf_llama.py" "$dir/hf" --vocab 257 --d-model 64 \
  --dtype f32 --std 0.05 >/dev/null || fail "make_hf_llama.py"
"$meshloom" import-hf "$dir/hf" --out "$dir/hf.h5" >/dev/null || fail "import-hf"
grep -v "^model:" "$dir/c.yaml" >"$dir/c_hf.yaml"
for weights in "--hf $dir/hf" "--checkpoint $dir/hf.h5"; do
  name=hf_$([[ $weights == --hf* ]] && echo dir || echo file)
  # shellcheck disable=SC2086  # the option and its value
  timeout 120 "$mpiexec" --oversubscribe --bind-to none -np 5 "$meshloom" eval -c "$dir/c_hf.yaml" \
    $weights --set eval.holdout=0.1 --tokens 3000 --out "$dir/$name" --report "$dir/$name.json" \
    >"$dir/$name.log" 2>&1 || { cat "$dir/$name.log"; fail "meshloom eval $weights failed"; }
done
/usr/bin/python3 -c "
import json, sys
a, b = (json.load(open(f'$dir/hf_{n}.json')) for n in ('dir', 'file'))
assert a['loss'] == b['loss'] and a['predictions'] == b['predictions'] == 2997, (a['loss'], b['loss'])
print('meshloom eval --hf: held-out loss', a['loss'], 'as its import')" || fail "--hf and its import differ"

# Bad input: a model that is not the checkpoint's, no held-out split, a
# length that does not fit the layout: one message naming the key, exit 2.
bad_eval() {  # EXPECTED ARGS...
  local expected=$1
  shift
  out=$(timeout 60 "$mpiexec" --oversubscribe --bind-to none -np 5 "$meshloom" eval -c "$dir/c.yaml" \
    --checkpoint "$dir/hdp/ckpt/step_00000009.h5" --out "$dir/bad_eval" "$@" 2>&1)
  code=$?
  [[ $code == 2 ]] || { echo "$out"; fail "eval $*: exit $code, not 2"; }
  [[ $(grep -c "$expected" <<<"$out") == 1 ]] || { echo "$out"; fail "eval $*: not one '$expected'"; }
}
bad_eval "model.d_model is 64, but model.init" --set eval.holdout=0.1 --set model.d_model=64
bad_eval "needs a held-out split: set eval.holdout"
bad_eval "the held-out split holds no token" --set eval.holdout=1e-9
bad_eval "data.seq_len 8192 needs 16 HDP ranks" --set eval.holdout=0.1 --seq-len 8192

# eval.every without a held-out split: one message naming the key, exit 2.
out=$(timeout 60 "$mpiexec" --oversubscribe --bind-to none -np 4 "$meshloom" train -c "$dir/c.yaml" \
  --set eval.every=5 --set run.dir="$dir/bad" 2>&1)
code=$?
[[ $code == 2 ]] || { echo "$out"; fail "eval.every without eval.holdout exited $code, not 2"; }
[[ $(grep -c "eval.every needs held-out data" <<<"$out") == 1 ]] ||
  { echo "$out"; fail "eval.every without eval.holdout: not one message naming eval.every"; }
echo "eval train test passed"
