#!/usr/bin/python3
"""Plot a run's metrics.jsonl (written by meshloom train) to PNG: loss,
throughput and imbalance per step, and each trainer's compute time.

Usage: plot_metrics.py RUN_DIR/metrics.jsonl [OUT.png]

A resumed run appends to the same file, so steps between the checkpoint and
the stop appear twice: the later row (the one the run continued from) is
plotted.
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) not in (2, 3) or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if len(sys.argv) == 2 else 2)
    path = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) == 3 else path.rsplit(".", 1)[0] + ".png"
    rows = [json.loads(line) for line in open(path) if line.strip()]
    by_step = {r["step"]: r for r in rows if "step" in r}  # not the ranks' summaries
    rows = [by_step[s] for s in sorted(by_step)]
    if not rows:
        sys.exit(f"{path}: no steps")
    steps = [r["step"] for r in rows]
    fig, ax = plt.subplots(2, 2, figsize=(11, 7))
    ax[0][0].plot(steps, [r["loss"] for r in rows])
    ax[0][0].set(title="loss", xlabel="step")
    ax[0][1].plot(steps, [r["tokens_per_s"] for r in rows])
    ax[0][1].set(title="tokens/s", xlabel="step")
    ax[1][0].plot(steps, [r["imbalance"] for r in rows], label="imbalance (max/mean compute)")
    ax[1][0].plot(steps, [r["mfu"] for r in rows], label="MFU")
    ax[1][0].set(title="imbalance and MFU", xlabel="step")
    ax[1][0].legend()
    trainers = len(rows[0]["trainers"])
    for t in range(trainers):
        ax[1][1].plot(steps, [r["trainers"][t]["compute"] for r in rows if len(r["trainers"]) > t],
                      label=f"trainer {t}", lw=0.8)
    ax[1][1].set(title="compute seconds per trainer", xlabel="step")
    if trainers <= 8:
        ax[1][1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"{out}: {len(rows)} steps")


if __name__ == "__main__":
    main()
