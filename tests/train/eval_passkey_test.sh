#!/usr/bin/env bash
# Passkey retrieval (meshloom eval --passkey) against an independent torch
# scoring: a short run of the quickstart's model shape on real text
# (train_runs.sh, byte tokens) dumps step 5 and checkpoints step 4, whose
# weights are the dump's; meshloom eval scores the grid on the checkpoint
# with 4 trainers (prompts of 512 split over rings of 2 at plan.capacity
# 256), and scripts/data/passkey_reference.py recomputes every candidate's
# log-likelihood from the dump in float64 (within 1e-4) and each verdict;
# its planted bug (scoring one position late) must fail. The grid's CSV,
# heatmap and report agree; a length above data.seq_len is one message
# naming eval.passkey.lengths, exit 2.
#   eval_passkey_test.sh MESHLOOM MPIEXEC
set -u
meshloom=$1 mpiexec=$2
# shellcheck source=tests/common/testlib.sh
source "$(dirname "$0")/../common/testlib.sh"
# shellcheck source=tests/train/train_runs.sh
source "$(dirname "$0")/train_runs.sh"
/usr/bin/python3 -c "import torch, h5py" || fail "python3-torch or python3-h5py missing (scripts/setup.sh)"

held_out=(--set eval.holdout=0.1 --set "data.sources[0].tokenizer=byte")
train pk 7 "${held_out[@]}" --set run.steps=6 --set checkpoint.every=5 --dump-step 5 "$dir/step5.h5"
timeout 300 "$mpiexec" --oversubscribe --bind-to none -np 7 "$meshloom" eval -c "$dir/c.yaml" \
  "${held_out[@]}" --checkpoint "$dir/pk/ckpt/step_00000004.h5" --passkey 128,512 \
  --set plan.capacity=256 --set eval.passkey.trials=3 --out "$dir/out" --report "$dir/report.json" \
  >"$dir/eval.log" 2>&1 || { cat "$dir/eval.log"; fail "meshloom eval --passkey failed"; }
grep -q "passkey: .* correct" "$dir/eval.log" || { cat "$dir/eval.log"; fail "no passkey line"; }
[[ -s $dir/out/passkey.png ]] || fail "no passkey heatmap"
/usr/bin/python3 "$root/scripts/data/passkey_reference.py" "$dir/step5.h5" \
  "$dir/out/passkey_prompts.jsonl" || fail "torch scores the passkey prompts otherwise"
if /usr/bin/python3 "$root/scripts/data/passkey_reference.py" --break shift "$dir/step5.h5" \
  "$dir/out/passkey_prompts.jsonl" >"$dir/broken.txt"; then
  fail "the planted scoring bug passed the check"
fi
/usr/bin/python3 - "$dir" <<'PY' || fail "passkey grid"
import csv, json, sys
d = sys.argv[1]
prompts = [json.loads(l) for l in open(f"{d}/out/passkey_prompts.jsonl")]
assert len(prompts) == 2 * 5 * 3, len(prompts)
assert all(len(s) <= p["length"] for p in prompts for s in p["sequences"])
cells = list(csv.DictReader(open(f"{d}/out/passkey.csv")))
report = json.load(open(f"{d}/report.json"))["passkey"]
assert len(cells) == len(report["cells"]) == 10
for c, r in zip(cells, report["cells"]):
    mine = [p for p in prompts if p["length"] == int(c["length"]) and p["depth"] == float(c["depth"])]
    correct = sum(all(p["scores"][0] > s for s in p["scores"][1:]) for p in mine)
    assert int(c["correct"]) == correct == r["correct"] and int(c["trials"]) == len(mine) == 3, c
print(f"passkey: {report['correct']} of {report['trials']} ({report['scoring']})")
PY
out=$(timeout 60 "$mpiexec" --oversubscribe --bind-to none -np 5 "$meshloom" eval -c "$dir/c.yaml" \
  "${held_out[@]}" --checkpoint "$dir/pk/ckpt/step_00000004.h5" --passkey 128,4096 2>&1)
code=$?
[[ $code == 2 ]] || { echo "$out"; fail "a passkey length above data.seq_len exited $code, not 2"; }
[[ $(grep -c "eval.passkey.lengths: 4096 is not between 64 and data.seq_len" <<<"$out") == 1 ]] ||
  { echo "$out"; fail "not one message naming eval.passkey.lengths"; }
echo "eval passkey test passed"
