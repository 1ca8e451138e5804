#!/usr/bin/python3
"""Draw meshloom eval's passkey grid (passkey.csv: length, depth, trials,
correct, accuracy, key_logprob) as a heatmap PNG: prompt length across,
the key's depth in the text down, the share of trials whose true key the
model ranked first in each cell.

Usage: plot_passkey.py passkey.csv OUT.png
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    rows = list(csv.DictReader(open(sys.argv[1])))
    if not rows:
        sys.exit(f"{sys.argv[1]}: no passkey cells")
    lengths = sorted({int(r["length"]) for r in rows})
    depths = sorted({float(r["depth"]) for r in rows})
    grid = [[float("nan")] * len(lengths) for _ in depths]
    for r in rows:
        grid[depths.index(float(r["depth"]))][lengths.index(int(r["length"]))] = float(r["accuracy"])
    fig, ax = plt.subplots(figsize=(1.2 + 0.9 * len(lengths), 1.2 + 0.5 * len(depths)))
    im = ax.imshow(grid, vmin=0, vmax=1, cmap="RdYlGn", aspect="auto")
    for y, row in enumerate(grid):
        for x, v in enumerate(row):
            ax.text(x, y, f"{v:.0%}", ha="center", va="center", fontsize=8)
    ax.set_xticks(range(len(lengths)), [str(n) for n in lengths])
    ax.set_yticks(range(len(depths)), [f"{d:g}" for d in depths])
    ax.set(xlabel="prompt length (tokens)", ylabel="depth of the key", title="passkey retrieval")
    fig.colorbar(im, ax=ax, label="share of trials correct")
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
