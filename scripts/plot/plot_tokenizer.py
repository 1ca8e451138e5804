#!/usr/bin/python3
"""Plot bench/results/tokenizer.csv (scripts/bench/bench_tokenizer.sh): encode MB/s
per core of meshloom and the npm tiktoken package, per corpus and encoding,
with the ratio over each pair of bars.

Usage: plot_tokenizer.py tokenizer.csv OUT.png
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
        sys.exit(f"{sys.argv[1]}: no rows")
    labels = [f"{r['corpus']}\n{r['encoding']}" for r in rows]
    ml = [float(r["meshloom_mb_s"]) for r in rows]
    js = [float(r["tiktoken_wasm_mb_s"]) for r in rows]
    x = range(len(rows))
    fig, ax = plt.subplots(figsize=(2.2 * len(rows) + 2, 4.5))
    ax.bar([i - 0.2 for i in x], ml, 0.4, label="meshloom")
    ax.bar([i + 0.2 for i in x], js, 0.4, label="npm tiktoken (WASM)")
    for i, r in enumerate(rows):
        ax.annotate(f"{float(r['ratio']):.1f}x", (i, max(ml[i], js[i])), ha="center",
                    va="bottom", xytext=(0, 3), textcoords="offset points")
    ax.set_xticks(list(x), labels)
    ax.set_ylabel("MB/s, one thread")
    ax.set_title(f"BPE encode throughput per core ({rows[0]['cpu']}, {rows[0]['date'][:10]})")
    ax.legend()
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
