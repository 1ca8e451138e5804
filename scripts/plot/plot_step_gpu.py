#!/usr/bin/python3
"""Plot bench/results/step_gpu.csv (scripts/bench/bench_step_gpu.sh): the attention
kernels' TFLOP/s and the step's MFU, meshloom's beside the PyTorch peer's
(scripts/gpu/torch_peer.py) where it was measured, each beside its target.

Usage: plot_step_gpu.py step_gpu.csv OUT.png
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    rows = {r["metric"]: r for r in csv.DictReader(open(sys.argv[1]))}
    val = lambda k: float(rows[k]["value"] or 0) if k in rows else 0.0  # noqa: E731
    device, date = rows["step_mfu"]["device"], rows["step_mfu"]["date"][:10]
    commit = rows["step_mfu"].get("commit") or "unknown"
    fig, ax = plt.subplots(1, 2, figsize=(10, 4))
    # The default kernels beside the mma.sync and WMMA families, per pass.
    width = 0.27
    for i, (family, suffix) in enumerate([("default", ""), ("mma.sync", "_mma"),
                                          ("WMMA", "_wmma")]):
        ys = [val(f"attention_{p}{suffix}_tflops") if f"attention_{p}{suffix}_tflops" in rows else 0
              for p in ("forward", "backward")]
        ax[0].bar([x + (i - 1) * width for x in (0, 1)], ys, width, label=family)
    ax[0].set_xticks([0, 1], ["forward", "backward"])
    ax[0].axhline(350, color="tab:red", ls="--", label="target (forward): 350")
    ax[0].set(title="attention kernels, 32K tokens", ylabel="TFLOP/s")
    ax[0].legend()
    names, mfus = ["meshloom"], [100 * val("step_mfu")]
    if val("torch_step_mfu") > 0:
        version = rows["torch_version"]["value"] if "torch_version" in rows else ""
        names.append(f"PyTorch {version}".strip())
        mfus.append(100 * val("torch_step_mfu"))
    bars = ax[1].bar(names, mfus, color=["tab:blue", "tab:orange"][:len(names)])
    ax[1].bar_label(bars, fmt="%.1f%%")
    ax[1].axhline(45, color="tab:red", ls="--", label="target: 45%")
    ax[1].set(title=f"~{val('params_billion'):.1f}B model, whole step", ylabel="MFU (%)",
              ylim=(0, max(50, 1.2 * max(mfus))))
    ax[1].legend(loc="upper left")
    fig.suptitle(f"CUDA backend on {device}, {date}, commit {commit}")
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
