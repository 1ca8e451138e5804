#!/usr/bin/env python3
"""Two runs' metrics.jsonl from step FROM on: the same data hashes, losses
within TOL relative. Used by tp_train_test.sh and pp_train_test.sh.

    same_losses.py A/metrics.jsonl B/metrics.jsonl FROM TOL
"""
import json, sys
def steps(path):
    out = {}
    for line in open(path):
        r = json.loads(line)
        if "step" in r: out[r["step"]] = (r["data_hash"], r["loss"])  # a resumed step: the later row
    return out
a, b, first, tol = steps(sys.argv[1]), steps(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
worst = 0.0
for s in sorted(k for k in a if k >= first):
    assert s in b, f"step {s} missing"
    assert a[s][0] == b[s][0], f"step {s}: other data ({a[s][0]} vs {b[s][0]})"
    worst = max(worst, abs(a[s][1] - b[s][1]) / abs(a[s][1]))
assert worst <= tol, f"losses differ by {worst:.3g} relative (> {tol})"
print(f"steps {first}-{max(a)}: same data, losses within {worst:.2g} relative")
