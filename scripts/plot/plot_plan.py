#!/usr/bin/python3
"""Charts for the planner (Debian python3 + matplotlib).

  plot_plan.py plan HDP.json STATIC.json -o out.png
      One step, trainer x time, for two plans side by side (the JSON dumps of
      `meshloom plan --json`, which `meshloom plan --png` and
      `meshloom simulate --png` write and pass here). Each bar is a micro-batch: packed whole sequences in blue, ring
      pieces of split sequences in orange to red by group size; white is idle.
      With more than 256 trainers, 256 evenly spaced rows are drawn.

  plot_plan.py pipelines SCHEDULE.csv -o out.png
      One step's 1F1B schedule per pipeline, for each scheduler in the CSV
      (`meshloom plan --pp N --png` writes it: scheduler, pipeline, stage,
      op, micro_batch, start, end) side by side: a row per (pipeline, stage),
      forwards light and backwards dark, each micro-batch its own hue; white
      is the bubble.

  plot_plan.py bench RESULTS.csv -o out.png
      scripts/bench/bench_plan.sh's CSV: planning latency and imbalance against the
      number of trainers.
"""
import argparse
import csv
import json
import math
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

MAX_ROWS = 256


def ring_colour(k, kmax):
    if k <= 1:
        return "#4878a8"
    x = math.log(k) / math.log(max(kmax, 2))
    return plt.cm.autumn_r(0.25 + 0.75 * min(1.0, x))


def draw_plan(ax, plan, xmax):
    trainers = plan["trainer_plans"]
    step = max(1, math.ceil(len(trainers) / MAX_ROWS))
    shown = trainers[::step]
    kmax = max([len(s["group"]) for s in plan["sequences"]] + [1])
    for row, t in enumerate(shown):
        by_colour = {}
        for mb in t["micro_batches"]:
            c = ring_colour(mb["k"], kmax)
            by_colour.setdefault(c, []).append((mb["start"], max(mb["end"] - mb["start"], 0.0)))
        for c, spans in by_colour.items():
            ax.broken_barh(spans, (row - 0.4, 0.8), facecolors=c, edgecolors="white", linewidth=0.3)
    ax.set_xlim(0, xmax * 1.02)
    ax.set_ylim(len(shown) - 0.5, -0.5)
    title = plan["planner"]
    if "static_cp" in plan:
        title += " (CP %d x DP %d)" % (plan["static_cp"], plan["static_dp"])
    ax.set_title("%s: step %.3g s, max/mean %.3f" % (title, plan["makespan_s"], plan["imbalance"]))
    ax.set_xlabel("seconds")
    label = "trainer" if step == 1 else "trainer (every %d-th)" % step
    ax.set_ylabel(label)
    ticks = list(range(0, len(shown), max(1, len(shown) // 8)))
    ax.set_yticks(ticks)
    ax.set_yticklabels([str(shown[i]["rank"]) for i in ticks])


def plot_plans(args):
    plans = []
    for path in (args.first, args.second):
        with open(path) as f:
            plans.append(json.load(f))
    xmax = max(p["makespan_s"] for p in plans) or 1.0
    rows = min(MAX_ROWS, max(len(p["trainer_plans"]) for p in plans))
    fig, axes = plt.subplots(1, 2, figsize=(14, 2.5 + rows * 0.03), sharex=True)
    for ax, p in zip(axes, plans):
        draw_plan(ax, p, xmax)
    fig.legend(
        handles=[
            Patch(color=ring_colour(1, 2), label="whole sequences, packed (no communication)"),
            Patch(color=ring_colour(2, 256), label="ring piece, small group"),
            Patch(color=ring_colour(256, 256), label="ring piece, large group"),
        ],
        loc="lower center",
        ncol=3,
    )
    tokens = plans[0]["tokens"]
    fig.suptitle(
        "One step: %d sequences, %d tokens, %d trainers, capacity %d"
        % (len(plans[0]["sequences"]), tokens, plans[0]["trainers"], plans[0]["capacity"])
    )
    fig.tight_layout(rect=(0, 0.06, 1, 0.95))
    fig.savefig(args.output, dpi=110)


def plot_bench(args):
    rows = list(csv.DictReader(open(args.first)))
    planners = []
    for r in rows:
        if r["planner"] not in planners:
            planners.append(r["planner"])
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    for name in planners:
        pts = sorted((int(r["trainers"]), float(r["planning_ms_median"]), float(r["imbalance"]),
                      float(r["step_over_ideal"])) for r in rows if r["planner"] == name and not r["error"])
        if not pts:
            continue
        t = [p[0] for p in pts]
        left.plot(t, [p[1] for p in pts], marker="o", label=name)
        right.plot(t, [p[2] for p in pts], marker="o", label=name + " max/mean")
        right.plot(t, [p[3] for p in pts], marker="x", linestyle="--", label=name + " step/ideal")
    left.axhline(50, color="grey", linestyle=":", label="50 ms target")
    left.set_xscale("log", base=2)
    left.set_yscale("log")
    left.set_xlabel("trainers")
    left.set_ylabel("planning latency, ms (median)")
    left.legend()
    right.axhline(1.05, color="grey", linestyle=":")
    right.set_xscale("log", base=2)
    right.set_xlabel("trainers")
    right.set_ylabel("imbalance")
    right.legend(fontsize=7)
    fig.suptitle("Planner at scale: global batch T x C tokens, Linux source lengths")
    fig.tight_layout()
    fig.savefig(args.output, dpi=110)


def plot_pipelines(args):
    ops = list(csv.DictReader(open(args.first)))
    schedulers = list(dict.fromkeys(r["scheduler"] for r in ops))
    pipelines = max(int(r["pipeline"]) for r in ops) + 1
    stages = max(int(r["stage"]) for r in ops) + 1
    xmax = max(float(r["end"]) for r in ops)
    cmap = plt.get_cmap("tab20")
    fig, axes = plt.subplots(1, len(schedulers), figsize=(7 * len(schedulers), 1 + 0.28 * pipelines * stages),
                             sharex=True, squeeze=False)
    for ax, name in zip(axes[0], schedulers):
        mine = [r for r in ops if r["scheduler"] == name]
        step = max(float(r["end"]) for r in mine)
        for r in mine:
            p, s, mb = int(r["pipeline"]), int(r["stage"]), int(r["micro_batch"])
            row = p * stages + s
            start, end = float(r["start"]), float(r["end"])
            base = cmap((2 * mb) % 20)
            colour = base if r["op"] == "B" else tuple(0.55 + 0.45 * c for c in base[:3])
            ax.barh(row, end - start, left=start, height=0.85, color=colour, edgecolor="none")
        for p in range(1, pipelines):
            ax.axhline(p * stages - 0.5, color="black", linewidth=0.6)
        ax.set_yticks([p * stages + (stages - 1) / 2 for p in range(pipelines)])
        ax.set_yticklabels([f"pipeline {p}" for p in range(pipelines)])
        ax.invert_yaxis()
        ax.set_xlim(0, xmax * 1.02)
        ax.set_xlabel("seconds (predicted)")
        ax.set_title(f"{name}: step {step:.3g} s ({stages} stages, rows top to bottom)")
    fig.legend(handles=[Patch(color=(0.7, 0.8, 0.95), label="forward"), Patch(color=cmap(0), label="backward")],
               loc="lower center", ncol=2)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(args.output, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["plan", "pipelines", "bench"])
    ap.add_argument("first")
    ap.add_argument("second", nargs="?")
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args()
    if args.mode == "plan":
        if not args.second:
            sys.exit("plot_plan.py plan needs two JSON dumps")
        plot_plans(args)
    elif args.mode == "pipelines":
        plot_pipelines(args)
    else:
        plot_bench(args)


if __name__ == "__main__":
    main()
