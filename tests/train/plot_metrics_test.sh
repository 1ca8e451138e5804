#!/usr/bin/env bash
# What scripts/plot/plot_metrics.py draws from a real run on text and images,
# through its --describe output:
#  - an "MFU" panel with a value at most 1 for every step (run.peak_gflops
#    set high, so every step has one), apart from the imbalance panel;
#  - a "loss by source" panel with a line for every source that
#    metrics.jsonl's source_loss records, the image source among them;
#  - the PNG is written.
# And the log's "loss by source" line names every configured source, saying
# "not seen in the last tenth" exactly for those with no predictions there
# (a rare source, weight 0.02, is likely to be one).
#   plot_metrics_test.sh MESHLOOM MPIEXEC
set -u
meshloom=$1 mpiexec=$2
# shellcheck source=tests/common/testlib.sh
source "$(dirname "$0")/../common/testlib.sh"
prepare_docs docs 'a*'
prepare_docs rare 'b*'
pack_test_images img
cat >"$dir/c.yaml" <<YAML
run: {timeout: 60, steps: 20, peak_gflops: 100000}
cluster: {roles: {constructors: 1, loaders: 1}}
model: {vocab_size: 257, d_model: 64, n_layers: 2, n_heads: 4, n_kv_heads: 2, ffn_dim: 160}
plan: {capacity: 1024}
data:
  seq_len: 1024
  tokens_per_step: 2048
  sources:
    - {name: docs, path: $dir/docs, weight: 1}
    - {name: rare, path: $dir/rare, weight: 0.02}
    - {name: pictures, path: "$dir/shards/img-*.tar", format: webdataset, tokenizer: byte, weight: 1}
  image: {max_side: 64, patch: 8}
YAML
timeout 120 "$mpiexec" --oversubscribe --bind-to none -np 4 "$meshloom" train -c "$dir/c.yaml" \
  --set run.dir="$dir/run" >"$dir/run.log" 2>&1 || { cat "$dir/run.log"; fail "meshloom train failed"; }
/usr/bin/python3 "$root/scripts/plot/plot_metrics.py" --describe "$dir/run/metrics.jsonl" \
  "$dir/metrics.png" >"$dir/panels.json" || fail "plot_metrics.py failed"
[[ -s $dir/metrics.png ]] || fail "no PNG"
grep "loss by source" "$dir/run.log" >"$dir/by_source.txt" || { cat "$dir/run.log"; fail "no loss by source line"; }
cat "$dir/by_source.txt"
/usr/bin/python3 - "$dir/run/metrics.jsonl" "$dir/panels.json" "$dir/by_source.txt" <<'PY' || fail "plot panels or loss by source line"
import json, re, sys
rows = [r for r in map(json.loads, open(sys.argv[1])) if "step" in r]
panels = {p["title"]: p["series"] for p in json.load(open(sys.argv[2]))["panels"]}
line = open(sys.argv[3]).read()
print("panels:", ", ".join(panels))
assert "MFU" in panels, panels.keys()
(mfu,) = panels["MFU"]  # alone in its panel, not beside the imbalance
assert len(mfu["values"]) == len(rows) and all(v is not None and 0 < v <= 1 for v in mfu["values"]), mfu
recorded = {name for r in rows for name in r["source_loss"]}
drawn = {s["label"]: s for s in panels["loss by source"]}
assert "pictures" in recorded and set(drawn) == recorded, (recorded, drawn.keys())
for name, s in drawn.items():
    assert s["values"] == [r["source_loss"][name] for r in rows if name in r["source_loss"]], name
# The last tenth of 20 steps: steps 18 and 19.
late = {name for r in rows[-2:] for name in r["source_loss"]}
for name in ("docs", "rare", "pictures"):
    said = re.search(rf"\b{name} (.*?)(,|$)", line)
    assert said, f"{name} not in the loss by source line"
    absent = "not seen in the last tenth" in said.group(1)
    assert absent == (name not in late), (name, said.group(1), late)
print("sources not seen in the last tenth:", sorted({"docs", "rare", "pictures"} - late) or "none")
PY
echo "ok: MFU and loss by source panels; the loss by source line names every source"
