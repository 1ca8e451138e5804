#!/usr/bin/python3
"""Scores meshloom eval's passkey prompts again with an independent torch model.

  passkey_reference.py [--break WHAT] DUMP.h5 passkey_prompts.jsonl

DUMP.h5 is a step dump (`meshloom train --dump-step N DUMP.h5`): its
parameters are the weights before step N, the ones the checkpoint of step
N-1 holds, which `meshloom eval --checkpoint` scored. passkey_prompts.jsonl
is what `meshloom eval --passkey` writes: every prompt's candidate
sequences (prompt + answer tokens), the position from which predictions
score the answer, and meshloom's log-likelihood of each candidate.

For every candidate this computes, in float64 with torch_reference.py's
model (docs/design.md "The model"), the sum of log p of the tokens after
position scored_from, and checks:
  |torch - meshloom| <= 1e-4 (1 + |torch|)   for every candidate
  the same verdict: true key (candidate 0) strictly highest, or not
                  (unless torch's margin is within 1e-3: a near tie)
and exits 1 when one fails. --break shift scores one position too late (the
check must catch it).

Debian's /usr/bin/python3 with python3-torch, python3-h5py.
"""
import argparse
import json
import os
import sys

import h5py
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_reference import model_logits, read_model  # noqa: E402

TOL = 1e-4


def answer_logprob(seq, scored_from, p, cfg, shift=0):
    tokens = torch.tensor(seq, dtype=torch.long)
    samples = torch.zeros(len(seq), dtype=torch.long)
    with torch.no_grad():
        logits, _ = model_logits(tokens, torch.zeros(0, 0, dtype=torch.float64), samples, p, cfg)
    at = torch.arange(scored_from + shift, len(seq) - 1)
    logp = torch.log_softmax(logits[at], -1)
    return logp.gather(1, tokens[at + 1][:, None]).sum().item()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dump")
    ap.add_argument("prompts")
    ap.add_argument("--break", dest="broken", choices=["shift"])
    args = ap.parse_args()
    cfg, p = read_model(h5py.File(args.dump, "r"))
    shift = 1 if args.broken == "shift" else 0
    worst, verdicts, ok = 0.0, 0, True
    for line in open(args.prompts):
        r = json.loads(line)
        mine = [answer_logprob(s, r["scored_from"], p, cfg, shift) for s in r["sequences"]]
        for t, m in zip(mine, r["scores"]):
            err = abs(t - m) / (1 + abs(t))
            worst = max(worst, err)
            ok &= err <= TOL
        right = lambda s: all(s[0] > d for d in s[1:])  # noqa: E731
        verdicts += 1
        margin = mine[0] - max(mine[1:])  # a near tie may fall either way in float32
        if right(mine) != right(r["scores"]) and abs(margin) > 1e-3:
            print(f"length {r['length']} depth {r['depth']} trial {r['trial']}: torch says "
                  f"{right(mine)}, meshloom {right(r['scores'])}")
            ok = False
    print(f"{verdicts} prompts: worst log-likelihood difference {worst:.3g} (tol {TOL:g})")
    print("OK" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
