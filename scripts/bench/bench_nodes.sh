#!/usr/bin/env bash
# bench_nodes.sh: HDP against the static DP x CP grid across nodes whose links
# cost what links cost (issue 21). A real 5-node Slurm on this machine
# (slurm/local-cluster.sh --nodes 5 --bandwidth RATE: network namespaces,
# each node's link shaped by tc tbf), 2 ranks a node through
# slurm/meshloom-multinode.sbatch: the constructor and the loader on mlnode1,
# 8 trainers on mlnode2-5, 2 a node (shared memory inside a node, TCP at RATE
# between nodes). Real text as bytes with a long policy, seq_len 2048 and
# C 512: the static grid is CP 4 x DP 2 (every sample in a ring of 4, each
# ring across 2 nodes); HDP rings only the long samples and keeps rings
# inside nodes where it can.
#   calib:  HDP, to calibrate the cost model (a, b, g) from its whole-sample
#           micro-batches (meshloom's calibration CSV)
#   hdp, static:  with that calibration, plan.bandwidth = RATE and
#           plan.intra_bandwidth = 2 GB/s, the same batches (data hashes
#           compared)
# Step time: the median over steps 1.. of the step's wall time. Predicted:
# the median over steps of the slowest trainer's planned time (metrics.jsonl
# `predicted`). Prints the table, writes bench/results/nodes.csv and
# nodes.png. Needs root (namespaces); about 6 minutes on 2 cores.
#   scripts/bench/bench_nodes.sh        (RATE=500mbit STEPS=6 TOKENS=16384)
set -euo pipefail
cd "$(dirname "$0")/../.."
RATE=${RATE:-500mbit} STEPS=${STEPS:-6} TOKENS=${TOKENS:-16384}
MESHLOOM=$PWD/${MESHLOOM:-build/app/meshloom}
[[ -x $MESHLOOM ]] || scripts/setup.sh >/dev/null
[[ -f data/bench_step/pydocs.idx && -f data/bench_step/bible.idx ]] ||
  TOKENIZER=byte OUT=data/bench_step scripts/data/prepare_data.sh >/dev/null
out=bench/results
mkdir -p "$out"
work=$(mktemp -d)
export MESHLOOM_SLURM_DIR=$work/slurm SLURM_CONF=$work/slurm/etc/slurm.conf
trap 'slurm/local-cluster.sh stop >/dev/null 2>&1; rm -rf "$work"' EXIT
slurm/local-cluster.sh start --nodes 5 --bandwidth "$RATE" >/dev/null
# tbf's rate in bytes/s, for the cost model.
bytes_per_s=$(/usr/bin/python3 -c "
import re, sys
m = re.fullmatch(r'([0-9.]+)([kmg]?)(bit|bps)', sys.argv[1].lower())
v = float(m.group(1)) * {'': 1, 'k': 1e3, 'm': 1e6, 'g': 1e9}[m.group(2)]
print(v / 8 if m.group(3) == 'bit' else v)" "$RATE")
cat >"$work/c.yaml" <<YAML
run: {steps: $STEPS, timeout: 600, threads: 1, peak_gflops: 20}
cluster: {roles: {constructors: 1, loaders: 1}}
model: {vocab_size: 257, d_model: 128, n_layers: 2, n_heads: 4, n_kv_heads: 2, ffn_dim: 352}
plan: {capacity: 512, bandwidth: $bytes_per_s, intra_bandwidth: 2.0e9}
data:
  seq_len: 2048
  tokens_per_step: $TOKENS
  long_policy: {threshold: 1024, share: 0.5}
  sources:
    - {name: pydocs, path: $PWD/data/bench_step/pydocs, format: indexed, weight: 2}
    - {name: bible, path: $PWD/data/bench_step/bible, format: indexed, weight: 1}
checkpoint: {every: 0}
YAML
# run NAME [train arguments]: the multi-node template on 5 nodes x 2 ranks.
run() {
  local name=$1
  shift
  echo "[bench_nodes] $name" >&2
  CONFIG=$work/c.yaml MESHLOOM=$MESHLOOM MPI_NET=10.231.0.0/24 MAX_RESTARTS=0 \
    EXTRA="--set run.dir=$work/$name $*" \
    sbatch --wait --nodes=5 --ntasks-per-node=2 --output="$work/$name.out" \
    slurm/meshloom-multinode.sbatch >/dev/null || { cat "$work/$name.out"; exit 1; }
}
run calib
/usr/bin/python3 - "$work/calib/metrics.jsonl" "$work/calib.csv" <<'PY'
# Whole-sample (k = 1) micro-batches of steps 1..: tokens, L^2 work, seconds.
import json, sys
with open(sys.argv[2], "w") as f:
    f.write("tokens,sum_l2,seconds\n")
    for line in open(sys.argv[1]):
        r = json.loads(line)
        if "step" not in r or r["step"] < 1:
            continue
        for t in r["trainers"]:
            for tokens, l2, k, s in t["micro"]:
                if k == 1:
                    f.write(f"{tokens},{l2:.6g},{s:.6g}\n")
PY
for p in hdp static; do run "$p" --set plan.planner=$p --set plan.calibration=$work/calib.csv; done
/usr/bin/python3 - "$work" "$out" "$RATE" "$TOKENS" <<'PY'
import json, re, statistics, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
work, out, rate, tokens = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
def steps_of(name):
    return [r for r in (json.loads(l) for l in open(f"{work}/{name}/metrics.jsonl"))
            if "step" in r and r["step"] >= 1]
runs = {n: steps_of(n) for n in ("hdp", "static")}
for a, b in zip(runs["hdp"], runs["static"]):
    assert a["data_hash"] == b["data_hash"], f"step {a['step']}: other data"
def rings(name):  # the lead's once-per-run count of rings by node
    m = re.search(r"step \d+: (\d+ rings: .*)", open(f"{work}/{name}.out").read())
    return m.group(1).strip() if m else "-"
rows = {}
for n, rs in runs.items():
    rows[n] = dict(step=statistics.median(r["seconds"] for r in rs),
                   pred=statistics.median(max(t["predicted"] for t in r["trainers"]) for r in rs),
                   rings=rings(n), loss=rs[-1]["loss"])
h, s = rows["hdp"], rows["static"]
print(f"| planner | step (median, steps 1-{len(runs['hdp'])}) | predicted step | rings of step 0 |")
print("| --- | --- | --- | --- |")
for n in ("static", "hdp"):
    r = rows[n]
    print(f"| {n} | {r['step']:.2f} s | {r['pred']:.2f} s | {r['rings']} |")
print(f"HDP vs static: measured {s['step'] / h['step']:.2f}x, predicted {s['pred'] / h['pred']:.2f}x; "
      f"links {rate}, same batches (data hashes equal over {len(runs['hdp'])} steps)")
with open(f"{out}/nodes.csv", "w") as f:
    f.write("planner,rate,step_seconds,predicted_seconds,rings,last_loss\n")
    for n in ("static", "hdp"):
        r = rows[n]
        f.write(f"{n},{rate},{r['step']:.4f},{r['pred']:.4f},\"{r['rings']}\",{r['loss']:.6f}\n")
fig, ax = plt.subplots(figsize=(6, 3.6))
for n in ("static", "hdp"):
    ax.plot([r["step"] for r in runs[n]], [r["seconds"] for r in runs[n]], "o-", label=f"{n} measured")
    ax.plot([r["step"] for r in runs[n]], [max(t["predicted"] for t in r["trainers"]) for r in runs[n]],
            "x--", label=f"{n} predicted")
ax.set_xlabel("step"); ax.set_ylabel("seconds"); ax.legend()
ax.set_title(f"8 trainers on 4 namespace nodes, links {rate}, {tokens} tokens/step")
fig.tight_layout(); fig.savefig(f"{out}/nodes.png", dpi=120)
print(f"wrote {out}/nodes.csv and {out}/nodes.png")
PY
