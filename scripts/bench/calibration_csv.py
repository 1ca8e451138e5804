#!/usr/bin/env python3
"""A run's measured micro-batches as a cost-model calibration CSV
(`tokens,sum_l2,seconds`, what `plan.calibration` and `meshloom plan
--calibrate` read): every trainer's micro-batches of steps 1.. of a
metrics.jsonl (step 0 warms up). --whole keeps only whole-sample (k = 1)
micro-batches, the ones the fit's model describes exactly.

    calibration_csv.py [--whole] METRICS.jsonl OUT.csv
"""
import json, sys
args = sys.argv[1:]
whole = "--whole" in args
metrics, out = [a for a in args if a != "--whole"]
with open(out, "w") as f:
    f.write("tokens,sum_l2,seconds\n")
    for line in open(metrics):
        r = json.loads(line)
        if "step" not in r or r["step"] < 1:
            continue
        for t in r["trainers"]:
            for tokens, l2, k, s in t["micro"]:
                if k == 1 or not whole:
                    f.write(f"{tokens},{l2:.6g},{s:.6g}\n")
