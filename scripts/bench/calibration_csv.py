#!/usr/bin/env python3
"""A run's measured micro-batches as a cost-model calibration CSV
(`tokens,sum_l2,seconds`, what `plan.calibration` and `meshloom plan
--calibrate` read): every trainer's micro-batches of steps 1.. of a
metrics.jsonl (step 0 warms up).

  --whole      keeps only whole-sample (k = 1) micro-batches, the ones the
               fit's model describes exactly.
  --stages N   pipelines of N stages (parallel.pp N at tp 1: trainer t is
               stage t % N of pipeline t // N): one row per micro-batch of a
               pipeline, its seconds summed over the stages.
  --ring-fastest  a ring's members each measure its time plus their wait
               for the others; keep the fastest member's (the last to
               arrive, who waits least). Members of one ring share k and
               attention L^2/k; of the m rings of a step with the same
               (k, L^2/k), the m fastest of their rows are kept.

    calibration_csv.py [--whole] [--stages N] [--ring-fastest] METRICS.jsonl OUT.csv
"""
import json
import sys
from collections import defaultdict


def step_rows(record, stages):
    """(tokens, l2, k, seconds) per micro-batch of each pipeline."""
    by = {t["trainer"]: t["micro"] for t in record["trainers"]}
    for first in sorted(t for t in by if t % stages == 0):
        lists = [by.get(first + s, []) for s in range(stages)]
        for mbs in zip(*lists):
            tokens, l2, k, _ = mbs[0]
            yield tokens, l2, k, sum(m[3] for m in mbs)


def fastest_members(rows):
    """Rings: of each (k, l2) group's rows, the fastest len // k."""
    out = [r for r in rows if r[2] == 1]
    groups = defaultdict(list)
    for r in rows:
        if r[2] > 1:
            groups[(r[2], round(r[1], 3))].append(r)
    for (k, _), members in groups.items():
        members.sort(key=lambda r: r[3])
        out += members[: max(1, len(members) // k)]
    return out


def main(argv):
    flags = {"--whole", "--ring-fastest"}
    whole = "--whole" in argv
    fastest = "--ring-fastest" in argv
    stages = 1
    if "--stages" in argv:
        i = argv.index("--stages")
        stages = int(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
    paths = [a for a in argv if a not in flags]
    if len(paths) != 2 or stages < 1:
        sys.exit(__doc__)
    metrics, out = paths
    with open(out, "w") as f:
        f.write("tokens,sum_l2,seconds\n")
        for line in open(metrics):
            r = json.loads(line)
            if "step" not in r or r["step"] < 1:
                continue
            rows = list(step_rows(r, stages))
            if fastest:
                rows = fastest_members(rows)
            for tokens, l2, k, s in rows:
                if k == 1 or not whole:
                    f.write(f"{tokens},{l2:.6g},{s:.6g}\n")


if __name__ == "__main__":
    main(sys.argv[1:])
