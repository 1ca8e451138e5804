#!/usr/bin/python3
"""torch_peer_check.py: the torch peer's model, loss and optimizer against meshloom's.

  torch_peer_check.py --lr LR [--break WHAT] DUMP0 DUMP1 [DUMP2 ...]

DUMPk is `meshloom train --dump-step k` of one run (docs/formats.md "Step
dump"), steps 0, 1, 2, ... of it, at a learning rate of LR at every step
(optim.warmup_steps 0, optim.min_lr = optim.lr) and optim.grad_clip 1.
torch_peer_model.py (torch_peer.py's model, in fp32 on the CPU without
autocast: the attention it picks there, its chunked cross-entropy, its AdamW
and clipping) starts from step 0's parameters, and on each step's batch:
  loss:        |peer - dump| / |dump|                    <= 1e-5
  gradients:   max|peer - dump| / max|peer|, per tensor  <= 1e-4
then clips and takes its AdamW step; its parameters then must match the next
dump's:
  parameters:  max|peer - dump| / LR                     <= 0.003
AdamW moves each element by about LR, so 0.003 LR is 0.3% of a step. On
tests/train/torch_peer_test.sh's dumps the peer measures about 5e-9 on the
loss, 2e-6 on the gradients and 7.5e-4 LR on the parameters; a beta2 of
0.999 instead of 0.95 costs 0.0099 LR after the second step.
--break WHAT plants a bug in the peer to show the check catches it:
rope_pairs (pairs 2i, 2i+1 instead of i, i+D/2), rope_sign (rotation the
other way), norm_center (RMSNorm subtracts the mean, as LayerNorm does).
Exits 0 when every check holds, 1 otherwise. Needs torch, h5py and numpy
(Debian: python3-torch python3-h5py).
"""
import argparse
import os
import sys

import h5py
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_peer_model as peer  # noqa: E402

LOSS_TOL, GRAD_TOL, PARAM_TOL = 1e-5, 1e-4, 0.003


def plant(bug):
    """Replaces one of the peer's functions with a wrong one."""
    if bug == "rope_pairs":
        def rope(x, cos, sin):
            a, b = x[..., 0::2].float(), x[..., 1::2].float()
            return torch.stack((a * cos - b * sin, b * cos + a * sin), -1).flatten(-2).to(x.dtype)
        peer.rope = rope
    elif bug == "rope_sign":
        def rope(x, cos, sin):
            return peer_rope(x, cos, -sin)
        peer_rope = peer.rope
        peer.rope = rope
    elif bug == "norm_center":
        def rms_norm(x, gain):
            return peer_norm(x.float() - x.float().mean(-1, keepdim=True), gain)
        peer_norm = peer.rms_norm
        peer.rms_norm = rms_norm


def read_dump(path):
    f = h5py.File(path, "r")
    if "patches" in f["batch"]:
        sys.exit(f"FAIL: {path} holds image positions; the peer models text only")
    dump = {
        "loss": float(f["loss"][()]),
        "tokens": f["batch/tokens"][()].astype(np.int64),
        "lengths": f["batch/sample_lengths"][()].tolist(),
        "params": {k: f["params"][k][()] for k in f["params"]},
        "grads": {k: f["grads"][k][()] for k in f["grads"]},
        "model": {k: v[()].item() for k, v in f["model"].items()
                  if isinstance(v, h5py.Dataset) and v.dtype.kind in "iuf"},
    }
    return dump


def shape_of(d):
    p, m = d["params"], d["model"]
    if m["rope_theta"] != peer.ROPE_THETA or m["norm_eps"] != peer.NORM_EPS:
        sys.exit(f"FAIL: the dump's rope_theta {m['rope_theta']} / norm_eps {m['norm_eps']} are "
                 f"not the peer's {peer.ROPE_THETA} / {peer.NORM_EPS}")
    vocab, dim = p["embed"].shape
    layers = sum(1 for k in p if k.endswith(".wq"))
    return peer.Shape(vocab, dim, layers, m["n_heads"], m["n_kv_heads"],
                      p["layers.0.w1"].shape[0], "lm_head" not in p)


def relative(a, b, scale):
    return float(np.abs(a - b).max() / scale) if scale > 0 else float(np.abs(a - b).max())


def check_step(model, d, k, args):
    """The peer's loss and gradients on dump k's batch; True when within tolerance."""
    cpu = torch.device("cpu")
    batch = peer.Batch(d["tokens"], d["lengths"], cpu)
    attend = peer.attention_candidates("auto", cpu, len(batch))[0]
    attend.prepare(batch, model.shape.heads)
    model.zero_grad(set_to_none=True)
    loss = model.loss(batch, attend, *peer.rope_tables(batch.positions, model.shape.head_dim),
                      args.loss_chunk, torch.float32)
    loss.backward()
    err = abs(loss.item() - d["loss"]) / abs(d["loss"])
    ok = err <= LOSS_TOL
    print(f"step {k}: {len(d['lengths'])} documents, {len(batch)} tokens, attention "
          f"{attend.name}; loss peer {loss.item():.9g} meshloom {d['loss']:.9g} "
          f"error {err:.2g} (tol {LOSS_TOL:g}){'' if ok else '  FAIL'}")
    worst, worst_name = 0.0, ""
    for name, p in model.named_weights():
        g = p.grad.double().numpy()
        e = relative(g, d["grads"][name], np.abs(g).max())
        if e > worst:
            worst, worst_name = e, name
    print(f"step {k}: gradients: worst {worst:.2g} ({worst_name}; tol {GRAD_TOL:g})"
          f"{'' if worst <= GRAD_TOL else '  FAIL'}")
    return ok and worst <= GRAD_TOL


def check_params(model, d, k, lr):
    worst, worst_name = 0.0, ""
    for name, p in model.named_weights():
        e = float(np.abs(p.detach().double().numpy() - d["params"][name]).max()) / lr
        if e > worst:
            worst, worst_name = e, name
    ok = worst <= PARAM_TOL
    print(f"after step {k - 1}'s AdamW: parameters: worst {worst:.2g} x lr ({worst_name}; "
          f"tol {PARAM_TOL:g}){'' if ok else '  FAIL'}")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dumps", nargs="+")
    ap.add_argument("--lr", type=float, required=True)
    ap.add_argument("--loss-chunk", type=int, default=40, help="rows of logits at once")
    ap.add_argument("--break", dest="broken", choices=["rope_pairs", "rope_sign", "norm_center"])
    args = ap.parse_args()
    if args.broken:
        plant(args.broken)
    dumps = [read_dump(p) for p in args.dumps]
    model = peer.Model(shape_of(dumps[0]), torch.device("cpu"))
    with torch.no_grad():
        for name, p in model.named_weights():
            p.copy_(torch.from_numpy(dumps[0]["params"][name]))
    opt, _ = peer.adamw(model, args.lr, torch.device("cpu"))
    ok = True
    for k, d in enumerate(dumps):
        if k:
            ok &= check_params(model, d, k, args.lr)
        ok &= check_step(model, d, k, args)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    print("OK" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
