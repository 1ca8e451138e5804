#!/usr/bin/env bash
# bench_nodes.sh: HDP against the static DP x CP grid across nodes whose links
# cost what links cost. A real 5-node Slurm on this machine
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
#   hdp, static, at each RATE:  with that calibration, plan.bandwidth =
#           RATE and plan.intra_bandwidth = 2 GB/s, the same batches (data
#           hashes compared)
# Step time: the median over steps 1.. of the step's wall time. Predicted:
# the median over steps of the slowest trainer's planned time (metrics.jsonl
# `predicted`). Prints the table, writes bench/results/nodes.csv and
# nodes.png. Needs root (namespaces); about 4 minutes on 2 cores.
#   scripts/bench/bench_nodes.sh   (RATES="100mbit 1gbit" STEPS=6 TOKENS=16384)
set -euo pipefail
cd "$(dirname "$0")/../.."
RATES=${RATES:-100mbit 1gbit} STEPS=${STEPS:-6} TOKENS=${TOKENS:-16384}
MESHLOOM=$PWD/${MESHLOOM:-build/app/meshloom}
[[ -x $MESHLOOM ]] || scripts/setup.sh >/dev/null
[[ -f data/bench_step/pydocs.idx && -f data/bench_step/bible.idx ]] ||
  TOKENIZER=byte OUT=data/bench_step scripts/data/prepare_data.sh >/dev/null
out=bench/results
mkdir -p "$out"
work=$(mktemp -d)
export MESHLOOM_SLURM_DIR=$work/slurm SLURM_CONF=$work/slurm/etc/slurm.conf
trap 'slurm/local-cluster.sh stop >/dev/null 2>&1; rm -rf "$work"' EXIT
# bytes_per_s RATE: tbf's rate in bytes/s, for the cost model.
bytes_per_s() {
  /usr/bin/python3 -c "
import re, sys
m = re.fullmatch(r'([0-9.]+)([kmg]?)(bit|bps)', sys.argv[1].lower())
v = float(m.group(1)) * {'': 1, 'k': 1e3, 'm': 1e6, 'g': 1e9}[m.group(2)]
print(v / 8 if m.group(3) == 'bit' else v)" "$1"
}
cat >"$work/c.yaml" <<YAML
run: {steps: $STEPS, timeout: 600, threads: 1, peak_gflops: 20}
cluster: {roles: {constructors: 1, loaders: 1}}
model: {vocab_size: 257, d_model: 128, n_layers: 2, n_heads: 4, n_kv_heads: 2, ffn_dim: 352}
plan: {capacity: 1024, intra_bandwidth: 2.0e9}
data:
  seq_len: 4096
  tokens_per_step: $TOKENS
  long_policy: {threshold: 2048, share: 0.3}
  sources:
    - {name: pydocs, path: $PWD/data/bench_step/pydocs, format: indexed, weight: 1}
    - {name: fortunes, path: $PWD/data/bench_step/fortunes, format: indexed, weight: 3}
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
# shellcheck disable=SC2206  # RATES: rates split at spaces
rates=($RATES)
slurm/local-cluster.sh start --nodes 5 --bandwidth "${rates[0]}" >/dev/null
run calib
/usr/bin/python3 scripts/bench/calibration_csv.py --whole "$work/calib/metrics.jsonl" "$work/calib.csv"
for rate in "${rates[@]}"; do
  slurm/local-cluster.sh start --nodes 5 --bandwidth "$rate" >/dev/null  # (re-shapes the links)
  for p in hdp static; do
    run "${p}_$rate" --set plan.planner=$p --set plan.calibration="$work/calib.csv" \
      --set plan.bandwidth="$(bytes_per_s "$rate")"
  done
done
/usr/bin/python3 - "$work" "$out" "$TOKENS" $RATES <<'PY'
import json, re, statistics, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
work, out, tokens, rates = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
def steps_of(name):
    return [r for r in (json.loads(l) for l in open(f"{work}/{name}/metrics.jsonl"))
            if "step" in r and r["step"] >= 1]
def rings(name):  # the lead's once-per-run count of rings by node
    m = re.search(r"step \d+: (\d+ rings: .*)", open(f"{work}/{name}.out").read())
    return m.group(1).strip() if m else "-"
def slowest_predicted(r):
    return max(t["predicted"] for t in r["trainers"])
runs, rows = {}, {}
for rate in rates:
    for p in ("static", "hdp"):
        n = f"{p}_{rate}"
        runs[n] = steps_of(n)
        rows[n] = dict(step=statistics.median(r["seconds"] for r in runs[n]),
                       pred=statistics.median(slowest_predicted(r) for r in runs[n]),
                       rings=rings(n), loss=runs[n][-1]["loss"])
    for a, b in zip(runs[f"hdp_{rate}"], runs[f"static_{rate}"]):
        assert a["data_hash"] == b["data_hash"], f"{rate}, step {a['step']}: other data"
first = runs[f"hdp_{rates[0]}"]
assert all([r["data_hash"] for r in v] == [r["data_hash"] for r in first] for v in runs.values())
print(f"| links | planner | step (median, steps 1-{len(first)}) | predicted step | HDP vs static, measured | predicted | rings of step 0 |")
print("| --- | --- | --- | --- | --- | --- | --- |")
with open(f"{out}/nodes.csv", "w") as f:
    f.write("rate,planner,step_seconds,predicted_seconds,speedup_measured,speedup_predicted,rings,last_loss\n")
    for rate in rates:
        s, h = rows[f"static_{rate}"], rows[f"hdp_{rate}"]
        for p, r in (("static", s), ("hdp", h)):
            up = f"{s['step'] / h['step']:.2f}x" if p == "hdp" else ""
            upp = f"{s['pred'] / h['pred']:.2f}x" if p == "hdp" else ""
            print(f"| {rate} | {p} | {r['step']:.2f} s | {r['pred']:.2f} s | {up} | {upp} | {r['rings']} |")
            f.write(f"{rate},{p},{r['step']:.4f},{r['pred']:.4f},{up.rstrip('x')},{upp.rstrip('x')},"
                    f"\"{r['rings']}\",{r['loss']:.6f}\n")
print(f"same batches in every run (data hashes equal over {len(first)} steps)")
fig, ax = plt.subplots(figsize=(6.4, 3.8))
x = range(len(rates))
for i, p in enumerate(("static", "hdp")):
    ax.bar([j + 0.4 * i - 0.2 for j in x], [rows[f"{p}_{r}"]["step"] for r in rates], 0.4, label=f"{p} measured")
    ax.plot([j + 0.4 * i - 0.2 for j in x], [rows[f"{p}_{r}"]["pred"] for r in rates], "kx", ms=9,
            label="predicted" if i == 0 else None)
ax.set_xticks(list(x), [f"links {r}" for r in rates]); ax.set_ylabel("step seconds (median)")
ax.set_title(f"8 trainers on 4 namespace nodes (2 a node), {tokens} tokens/step"); ax.legend()
fig.tight_layout(); fig.savefig(f"{out}/nodes.png", dpi=120)
print(f"wrote {out}/nodes.csv and {out}/nodes.png")
PY
