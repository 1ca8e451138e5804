#!/usr/bin/python3
"""Plot a run's held-out loss by position (eval_positions.csv, written by
meshloom train with eval.every) to PNG: the long-context curve, one line per
evaluation (at most the last 6), each bucket's mean loss at its first
position, on a log2 axis. A resumed run appends rows: the later rows of a
step are drawn.

Usage: plot_eval_positions.py RUN_DIR/eval_positions.csv [OUT.png]
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read_curves(path):
    """{step: [(first_position, loss)]} for buckets with predictions, the later rows of a step."""
    curves = {}
    for row in csv.DictReader(open(path)):
        step, first = int(row["step"]), int(row["first_position"])
        if int(row["predictions"]) == 0:
            continue
        if first == 0 or step not in curves:  # a bucket 0 starts the evaluation's rows again
            curves[step] = []
        curves[step].append((first, float(row["loss"])))
    return curves


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    path = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) == 3 else path.rsplit(".", 1)[0] + ".png"
    curves = read_curves(path)
    if not curves:
        sys.exit(f"{path}: no held-out predictions")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for step in sorted(curves)[-6:]:
        xs = [max(p, 0.5) for p, _ in curves[step]]  # position 0 drawn at 0.5 on the log axis
        ax.plot(xs, [v for _, v in curves[step]], marker="o", ms=3, label=f"after step {step}")
    ax.set_xscale("log", base=2)
    ax.set(title="held-out loss by position", xlabel="position in the sample (bucket start)",
           ylabel="mean loss")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(out)


if __name__ == "__main__":
    main()
