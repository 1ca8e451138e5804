#!/usr/bin/env bash
# bench_ckpt.sh: what checkpoints cost, gathered on trainer 0 (format 1,
# checkpoint.collective: false, yesterday's path kept for this comparison)
# against every trainer writing its own part (format 2, the default), side by
# side in one run:
#  1. scale: at 4, 8 and 16 trainers with ZeRO-1 (the moments sharded, as
#     at scale) and 1,024 tokens a step (so that the state, not the
#     activations, dominates memory, as for a large model), a background
#     checkpoint every 4 steps:
#     each trainer's peak RSS against its peak before the first save, the
#     state bytes each wrote, trainer 0's save time (start to file complete)
#     and the stall training saw (the slowest trainer);
#  2. overhead: 4 trainers, $STEPS steps: none, a background checkpoint every
#     10 steps (both formats) and a synchronous one every step: mean step
#     time, and the stall as a share of the time trained.
# The figures come from each run's metrics.jsonl (the trainers' final
# reports). Writes bench/results/ckpt_scale.csv, ckpt.csv, ckpt.png and
# markdown tables on stdout.
#   TRAINERS="4 8 16" STEPS=30 PARTS="scale overhead" scripts/bench/bench_ckpt.sh
set -euo pipefail
source "$(dirname "$0")/train_common.sh"
mkdir -p "$out"
TRAINERS=${TRAINERS:-4 8 16}
PARTS=${PARTS:-scale overhead}
STEPS=${STEPS:-30}
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
cat >"$work/c.yaml" <<YAML
run: {steps: $STEPS, timeout: 300}
cluster: {roles: {constructors: 1, loaders: 1}}
model: {vocab_size: 50257, d_model: 256, n_layers: 4, n_heads: 8, n_kv_heads: 4, ffn_dim: 688}
data:
  seq_len: 1024
  tokens_per_step: 2048
  sources:
    - {name: pydocs, path: $PWD/data/prepared/pydocs}
    - {name: bible, path: $PWD/data/prepared/bible}
checkpoint: {keep: 2, full_every: 4}
YAML
# summary RUN MODE TRAINERS [BASE]: one CSV row of RUN's figures (the header
# below); memory growth is each trainer's peak against its peak in BASE, the
# same run without checkpoints (the same batches on each trainer, so the same
# training peak: HDP's placement makes that differ between trainers).
summary() {
  /usr/bin/python3 - "$work/$1/metrics.jsonl" "$2" "$3" "${4:+$work/$4/metrics.jsonl}" <<'PY'
import json, statistics, sys
def load(path):
    rows = [json.loads(l) for l in open(path)]
    final = [r for r in rows if r.get("final")][-1]
    trainers = sorted((r for r in final["ranks"] if r["role"] == "trainer"), key=lambda r: r["rank"])
    return [r for r in rows if "step" in r], trainers
steps, trainers = load(sys.argv[1])
base = load(sys.argv[4])[1] if sys.argv[4] else trainers
walls = [max(t["step"] + t["wait"] for t in r["trainers"]) for r in steps]
mean_step = statistics.mean(walls[5:]) if len(walls) > 5 else statistics.mean(walls)
ck = [t.get("checkpoints", {}) for t in trainers]
saved = ck[0].get("saved", 0)
peaks = [t["peak_rss_kib"] / 1024 for t in trainers]
growth = [t["peak_rss_kib"] / b["peak_rss_kib"] for t, b in zip(trainers, base)]
others = statistics.median(growth[1:]) if len(growth) > 1 else growth[0]
stall = max(c.get("stall_seconds", 0) for c in ck)
per = lambda x: x / saved if saved else 0
written = [per(c.get("bytes", 0)) / 2**20 for c in ck]
print(",".join(str(x) for x in [
    sys.argv[2], sys.argv[3], len(steps), saved, f"{mean_step:.4f}",
    f"{per(ck[0].get('save_seconds', 0)):.3f}", f"{per(stall):.4f}",
    f"{100 * stall / sum(walls):.2f}",
    f"{written[0]:.1f}", f"{min(written[1:] or written):.1f}", f"{max(written[1:] or written):.1f}",
    f"{peaks[0]:.0f}", f"{statistics.median(peaks[1:] or peaks):.0f}",
    f"{100 * (growth[0] - 1):.1f}", f"{100 * (others - 1):.1f}",
    f"{100 * (growth[0] / others - 1):.1f}"]))
PY
}
header=mode,trainers,steps,checkpoints,mean_step_s,save_s,stall_s,stall_pct,trainer0_mib_written,others_min_mib_written,others_max_mib_written,trainer0_peak_mib,others_median_peak_mib,trainer0_growth_pct,others_median_growth_pct,trainer0_over_others_pct
if [[ $PARTS == *scale* ]]; then
  echo "$header" >"$out/ckpt_scale.csv"
  for t in $TRAINERS; do
    for mode in none gathered collective; do
      collective=$([[ $mode == collective ]] && echo true || echo false)
      every=$([[ $mode == none ]] && echo 0 || echo 4)
      bench_train "scale-$t-$mode" $((t + 2)) --set run.steps=12 --set checkpoint.every=$every \
        --set checkpoint.collective=$collective --set optim.zero1=true \
        --set data.seq_len=512 --set data.tokens_per_step=1024
      [[ $mode == none ]] || summary "scale-$t-$mode" "$mode" "$t" "scale-$t-none" >>"$out/ckpt_scale.csv"
    done
  done
fi
if [[ $PARTS == *overhead* ]]; then
  echo "$header" >"$out/ckpt.csv"
  bench_train none 6
  summary none none 4 >>"$out/ckpt.csv"
  for mode in gathered collective; do
    collective=$([[ $mode == collective ]] && echo true || echo false)
    bench_train "bg10-$mode" 6 --set checkpoint.every=10 --set checkpoint.collective=$collective
    summary "bg10-$mode" "background-every-10-steps-$mode" 4 none >>"$out/ckpt.csv"
  done
  bench_train sync 6 --set checkpoint.every=1 --set checkpoint.background=false
  summary sync synchronous-every-step-collective 4 none >>"$out/ckpt.csv"
fi

/usr/bin/python3 - "$out" "$commit" <<'PY'
import csv, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
out, commit = sys.argv[1:]
scale = list(csv.DictReader(open(f"{out}/ckpt_scale.csv")))
over = list(csv.DictReader(open(f"{out}/ckpt.csv")))
print(f"at commit {commit}\n")
print("| trainers | checkpoints | save (trainer 0) | stall per save | written: trainer 0 / others (MiB) "
      "| peak RSS: trainer 0 / others (MiB) | growth over training: trainer 0 / others | trainer 0 over others |")
print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for r in scale:
    print(f"| {r['trainers']} | {r['mode']} | {float(r['save_s']):.2f} s | {float(r['stall_s']) * 1e3:.0f} ms "
          f"| {r['trainer0_mib_written']} / {r['others_min_mib_written']}-{r['others_max_mib_written']} "
          f"| {r['trainer0_peak_mib']} / {r['others_median_peak_mib']} "
          f"| {r['trainer0_growth_pct']}% / {r['others_median_growth_pct']}% | {r['trainer0_over_others_pct']}% |")
base = float(over[0]["mean_step_s"])
print("\n| 4 trainers | mean step | overhead | stall per save | stall share of time trained |")
print("| --- | ---: | ---: | ---: | ---: |")
for r in over:
    t = float(r["mean_step_s"])
    print(f"| {r['mode']} | {t:.3f} s | {100 * (t - base) / base:+.1f}% | {float(r['stall_s']) * 1e3:.0f} ms "
          f"| {r['stall_pct']}% |")
fig, (a, b) = plt.subplots(1, 2, figsize=(11, 3.8))
ts = sorted({int(r["trainers"]) for r in scale})
width = 0.2
for i, (mode, key, colour) in enumerate([("gathered", "trainer0_growth_pct", "#c54"),
                                         ("gathered", "others_median_growth_pct", "#e99"),
                                         ("collective", "trainer0_growth_pct", "#2a7"),
                                         ("collective", "others_median_growth_pct", "#8d8")]):
    ys = [float(next(r[key] for r in scale if r["mode"] == mode and int(r["trainers"]) == t)) for t in ts]
    who = "trainer 0" if key.startswith("trainer0") else "others (median)"
    a.bar([x + (i - 1.5) * width for x in range(len(ts))], ys, width, color=colour, label=f"{mode}: {who}")
a.set_xticks(range(len(ts)), [f"{t} trainers" for t in ts])
a.set_ylabel("peak RSS over training peak (%)")
a.set_title("memory while saving (ZeRO-1)")
a.legend(fontsize=7)
for mode, colour in [("gathered", "#c54"), ("collective", "#2a7")]:
    rows = [r for r in scale if r["mode"] == mode]
    b.plot([int(r["trainers"]) for r in rows], [float(r["save_s"]) for r in rows], "o-", color=colour,
           label=f"{mode}: save")
    b.plot([int(r["trainers"]) for r in rows], [float(r["stall_s"]) for r in rows], "s--", color=colour,
           label=f"{mode}: stall")
b.set_xlabel("trainers")
b.set_ylabel("seconds per checkpoint")
b.set_title(f"save time and stall (commit {commit})")
b.legend(fontsize=7)
plt.tight_layout()
plt.savefig(f"{out}/ckpt.png", dpi=110)
print(f"\nwrote {out}/ckpt_scale.csv, {out}/ckpt.csv and {out}/ckpt.png")
PY
