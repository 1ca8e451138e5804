#!/usr/bin/python3
"""Plot a run's metrics.jsonl (written by meshloom train) to PNG, one panel
each: loss (and the held-out loss, with eval.every), loss by source (where the run records it), tokens/s, MFU,
imbalance, and each trainer's compute time.

Usage: plot_metrics.py [--describe] RUN_DIR/metrics.jsonl [OUT.png]

--describe prints, as JSON, the panels and series the PNG draws (title,
label, steps and values; a step without a value, such as MFU with the peak
unknown, is null), for tests and scripts.

A resumed run appends to the same file, so steps between the checkpoint and
the stop appear twice: the later row (the one the run continued from) is
plotted.
"""
import json
import math
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import PercentFormatter  # noqa: E402


def read_steps(path):
    """The step rows in step order, the later row of a step written twice."""
    rows = [json.loads(line) for line in open(path) if line.strip()]
    by_step = {r["step"]: r for r in rows if "step" in r}  # not the ranks' summaries
    return [by_step[s] for s in sorted(by_step)]


def series(label, rows, value):
    """A line: the steps of `rows` and value(row) (None where unknown)."""
    return {"label": label, "steps": [r["step"] for r in rows], "values": [value(r) for r in rows]}


def source_series(rows):
    """One line per source, over the steps with predictions from it."""
    names = []
    for r in rows:
        names += [n for n in r.get("source_loss", {}) if n not in names]
    return [series(n, [r for r in rows if n in r["source_loss"]], lambda r, n=n: r["source_loss"][n])
            for n in names]


def panels(rows):
    """What the figure draws: a title and lines per panel."""
    loss = [series("training loss", rows, lambda r: r["loss"])]
    evals = [r for r in rows if "eval" in r]
    if evals:  # eval.every: the held-out loss beside the training loss
        loss.append(series("held-out loss", evals, lambda r: r["eval"]["loss"]))
    out = [{"title": "loss", "series": loss}]
    by_source = source_series(rows)
    if by_source:  # none on the GPU backend
        out.append({"title": "loss by source", "series": by_source})
    out.append({"title": "tokens/s", "series": [series("tokens/s", rows, lambda r: r["tokens_per_s"])]})
    # null (older files: above 1) where the peak is unknown: metrics.jsonl's mfu (docs/formats.md)
    out.append({"title": "MFU", "percent": True,
                "series": [series("MFU", rows, lambda r: r["mfu"] if r.get("mfu") is not None and
                                  r["mfu"] <= 1 else None)]})
    out.append({"title": "imbalance (max/mean compute)",
                "series": [series("imbalance", rows, lambda r: r["imbalance"])]})
    trainers = max(len(r["trainers"]) for r in rows)
    out.append({"title": "compute seconds per trainer", "legend": trainers <= 8, "series": [
        series(f"trainer {t}", [r for r in rows if len(r["trainers"]) > t],
               lambda r, t=t: r["trainers"][t]["compute"]) for t in range(trainers)]})
    return out


def draw(ax, panel, steps):
    for s in panel["series"]:
        ys = [math.nan if v is None else v for v in s["values"]]
        # dots too: a value between unknown ones is no line
        ax.plot(s["steps"], ys, label=s["label"], lw=0.8 if len(panel["series"]) > 1 else 1.2,
                marker="." if None in s["values"] else None, ms=3)
    pad = max(0.5, 0.02 * (steps[-1] - steps[0]))
    ax.set(title=panel["title"], xlabel="step", xlim=(steps[0] - pad, steps[-1] + pad))
    if panel.get("percent"):  # MFU
        ax.yaxis.set_major_formatter(PercentFormatter(xmax=1))
        ax.set_ylim(bottom=0, top=max([v for s in panel["series"] for v in s["values"] if v] + [0.01]) * 1.1)
        unknown = [st for s in panel["series"] for st, v in zip(s["steps"], s["values"]) if v is None]
        if unknown:
            note = f"n/a (peak unknown) at {len(unknown)} of {len(steps)} steps, from step {unknown[0]}"
            ax.text(0.5, 0.5, note, ha="center", va="center", transform=ax.transAxes)
    if len(panel["series"]) > 1 and panel.get("legend", True):
        ax.legend(fontsize=7)


def main():
    args = sys.argv[1:]
    describe = "--describe" in args
    args = [a for a in args if a != "--describe"]
    if len(args) not in (1, 2) or args[0] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if args[:1] in (["-h"], ["--help"]) else 2)
    path = args[0]
    out = args[1] if len(args) == 2 else path.rsplit(".", 1)[0] + ".png"
    rows = read_steps(path)
    if not rows:
        sys.exit(f"{path}: no steps")
    figure = panels(rows)
    nrows = (len(figure) + 1) // 2
    fig, axes = plt.subplots(nrows, 2, figsize=(11, 3.3 * nrows), squeeze=False)
    flat = [a for row in axes for a in row]
    for ax, panel in zip(flat, figure):
        draw(ax, panel, [r["step"] for r in rows])
    for ax in flat[len(figure):]:
        ax.set_visible(False)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    if describe:
        print(json.dumps({"png": out, "steps": len(rows), "panels": figure}))
    else:
        print(f"{out}: {len(rows)} steps")


if __name__ == "__main__":
    main()
