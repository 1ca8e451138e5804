#!/usr/bin/python3
"""Checks a step dump against an independent torch implementation of the model.

  torch_reference.py [--grad-tol T] [--break WHAT] DUMP.h5

DUMP.h5 is what `meshloom train --dump-step N DUMP.h5` writes (docs/formats.md,
"Step dump"). This script rebuilds the step's batch from it (the samples from
/batch/sample_lengths, each image position's input from /batch/patches) and
computes, in float64 with torch, the model of docs/design.md "The model" from
the dump's parameters: Llama-style, RMSNorm, GQA, rotate-half RoPE (scaled as
/model/rope_scaling says), SwiGLU,
tied or untied head, Fuyu-style image positions (input patch_embed · patch,
no target), positions restarting at 0 in every sample, attention within a
sample only; loss = the sum of -log softmax over the batch's predictions
divided by their count. In a sample, position t predicts token t+1 when
neither is an image position. torch's autograd gives the gradients.

Checks, and exits 1 when one fails:
  loss:  |loss - /loss| / |loss|                          <= 1e-5
  grads: max|g_torch - g_dump| / max|g_torch|, per tensor <= --grad-tol (1e-4)
The C++ computes in float32: the dumps of tests/train/dump_torch_reference_test.sh
measure about 1e-8 on the loss and at most 2e-6 on the gradients, so 1e-4
leaves a margin of 50 for other shapes and summation orders, while each bug
that --break plants costs 0.4 or more on some gradient. The batch itself
(which pixels a patch holds) is taken as given.

--break WHAT plants a bug in this reference, to show that the check catches
it (the ctest expects each to fail): rope (pairs (2i, 2i+1) instead of
rotate-half), patch (an image position's input is embed[0], not its patch),
image_predicts (the last image position predicts the first caption token),
mask (attention crosses samples), gqa (query head j reads KV head j % KV).
RoPE depends only on position differences, so positions that continue
across samples instead of restarting cannot be seen in a dump.

Debian's /usr/bin/python3 with python3-torch, python3-h5py.
"""
import argparse
import math
import sys

import h5py
import numpy as np
import torch

LOSS_TOL = 1e-5
IMAGE = -1  # the token of an image position


def rms_norm(x, gain, eps):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * gain


def frequencies(D, theta, scaling):
    """theta^(-2i/D), then model.rope_scaling as design.md "The model" defines it."""
    freq = theta ** (-2.0 * torch.arange(D // 2, dtype=torch.float64) / D)
    kind = scaling.get("type", "none")
    if kind == "linear":
        return freq / scaling["factor"]
    if kind != "llama3":
        return freq
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    original = scaling["original_max_position_embeddings"]
    wavelength = 2 * math.pi / freq
    smooth = (original / wavelength - low) / (high - low)
    blended = (1 - smooth) * freq / factor + smooth * freq
    return torch.where(wavelength < original / high, freq,
                       torch.where(wavelength > original / low, freq / factor, blended))


def rope(x, positions, theta, broken, scaling):
    """x [heads, n, D]; rotates dimension i with i + D/2 by position * its frequency."""
    D = x.shape[-1]
    freq = frequencies(D, theta, scaling)
    angle = positions.to(torch.float64)[:, None] * freq[None, :]  # [n, D/2]
    cos, sin = torch.cos(angle), torch.sin(angle)
    if broken:  # the wrong convention: pairs (2i, 2i+1)
        a, b = x[..., 0::2], x[..., 1::2]
        return torch.stack((a * cos - b * sin, b * cos + a * sin), -1).flatten(-2)
    a, b = x[..., : D // 2], x[..., D // 2:]
    return torch.cat((a * cos - b * sin, b * cos + a * sin), -1)


def attention(x, p, i, positions, mask, cfg, broken):
    n, d = x.shape
    H, KV = cfg["n_heads"], cfg["n_kv_heads"]
    D = d // H
    q = (x @ p[f"layers.{i}.wq"].T).view(n, H, D).transpose(0, 1)
    k = (x @ p[f"layers.{i}.wk"].T).view(n, KV, D).transpose(0, 1)
    v = (x @ p[f"layers.{i}.wv"].T).view(n, KV, D).transpose(0, 1)
    q = rope(q, positions, cfg["rope_theta"], broken == "rope", cfg["rope_scaling"])
    k = rope(k, positions, cfg["rope_theta"], broken == "rope", cfg["rope_scaling"])
    # Query head j reads KV head j // (H / KV) (the planted bug: j % KV).
    kv_of = torch.arange(H) // (H // KV) if broken != "gqa" else torch.arange(H) % KV
    k, v = k[kv_of], v[kv_of]
    scores = (q @ k.transpose(1, 2) / D ** 0.5).masked_fill(~mask, float("-inf"))
    out = torch.softmax(scores, -1) @ v  # [H, n, D]
    return out.transpose(0, 1).reshape(n, H * D) @ p[f"layers.{i}.wo"].T


def segment_loss(tokens, patches, samples, p, cfg, broken):
    """Sum of -log p over the predictions of whole samples (ids `samples`), and their count."""
    logits, image = model_logits(tokens, patches, samples, p, cfg, broken)
    # Position t predicts token t+1 of its sample when neither is an image position.
    predicts = (samples[:-1] == samples[1:]) & ~image[1:]
    predicts &= ~image[:-1] if broken != "image_predicts" else torch.ones_like(predicts)
    at = predicts.nonzero()[:, 0]
    logp = torch.log_softmax(logits[at], -1)
    return -logp.gather(1, tokens[at + 1][:, None]).sum(), len(at)


def model_logits(tokens, patches, samples, p, cfg, broken=None):
    """The model's logits [n, V] at every position of whole samples, and the image positions."""
    image = tokens == IMAGE
    x = p["embed"][tokens.clamp(min=0)]
    if image.any():
        if "patch_embed" in p and broken != "patch":
            x_img = patches @ p["patch_embed"].T
        else:  # the planted bug: the image's patch is ignored
            x_img = p["embed"][torch.zeros(len(patches), dtype=torch.long)]
        x = x.index_put((image.nonzero()[:, 0],), x_img)
    # Position ids restart at 0 in every sample; attention stays in the sample.
    n = len(tokens)
    first = torch.searchsorted(samples, samples)  # each position's sample start
    positions = torch.arange(n) - first
    mask = torch.ones(n, n, dtype=torch.bool).tril()
    if broken != "mask":
        mask &= samples[:, None] == samples[None, :]
    eps = cfg["norm_eps"]
    for i in range(cfg["n_layers"]):
        h = x + attention(rms_norm(x, p[f"layers.{i}.attn_norm"], eps), p, i, positions, mask,
                          cfg, broken)
        m = rms_norm(h, p[f"layers.{i}.mlp_norm"], eps)
        x = h + (torch.nn.functional.silu(m @ p[f"layers.{i}.w1"].T) *
                 (m @ p[f"layers.{i}.w3"].T)) @ p[f"layers.{i}.w2"].T
    return rms_norm(x, p["final_norm"], eps) @ p.get("lm_head", p["embed"]).T, image


def read_model(f, requires_grad=False):
    """A step dump's model: its settings and its parameters in float64."""
    cfg = {k: f["model"][k][()].item() for k in ("n_heads", "n_kv_heads", "rope_theta", "norm_eps")}
    scaling = f["model"].get("rope_scaling", {})
    cfg["rope_scaling"] = {k: (v[()].decode() if isinstance(v[()], bytes) else v[()].item())
                           for k, v in scaling.items()}
    p = {k: torch.tensor(f["params"][k][()], dtype=torch.float64, requires_grad=requires_grad)
         for k in f["params"]}
    cfg["n_layers"] = sum(1 for k in p if k.endswith(".wq"))
    return cfg, p


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dump")
    ap.add_argument("--grad-tol", type=float, default=1e-4)
    ap.add_argument("--break", dest="broken",
                    choices=["rope", "patch", "image_predicts", "mask", "gqa"])
    args = ap.parse_args()
    f = h5py.File(args.dump, "r")
    cfg, p = read_model(f, requires_grad=True)
    tokens = torch.tensor(f["batch/tokens"][()], dtype=torch.long)
    lengths = f["batch/sample_lengths"][()].tolist()
    patches = torch.tensor(f["batch/patches"][()], dtype=torch.float64) if "patches" in f[
        "batch"] else torch.zeros(0, 0, dtype=torch.float64)
    images = int((tokens == IMAGE).sum())
    if set(f["grads"]) != set(p):
        sys.exit(f"FAIL: grads {sorted(f['grads'])} but params {sorted(p)}")
    if sum(lengths) != len(tokens) or patches.shape[0] != images:
        sys.exit(f"FAIL: {sum(lengths)} tokens in samples, {len(tokens)} in the batch, "
                 f"{images} image positions, {patches.shape[0]} patches")

    samples = torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths))
    if args.broken == "mask":  # the whole batch at once, attention across samples
        total, count = segment_loss(tokens, patches, samples, p, cfg, args.broken)
    else:  # sample by sample: memory stays linear in the batch
        total, count, at, img = 0.0, 0, 0, 0
        for length in lengths:
            t = tokens[at:at + length]
            k = int((t == IMAGE).sum())
            s, c = segment_loss(t, patches[img:img + k], samples[at:at + length], p, cfg,
                                args.broken)
            total, count, at, img = total + s, count + c, at + length, img + k
    loss = total / count
    loss.backward()

    ok = True
    dumped = float(f["loss"][()])
    err = abs(loss.item() - dumped) / abs(loss.item())
    print(f"{len(lengths)} samples, {len(tokens)} positions ({images} image), {count} predictions")
    print(f"loss: torch {loss.item():.10g} dump {dumped:.10g} error {err:.3g} (tol {LOSS_TOL:g})")
    ok &= err <= LOSS_TOL
    print(f"{'gradient':<24} {'shape':<14} {'max|diff|/max|g|':>16}")
    worst = 0.0
    for name in f["grads"]:
        g = p[name].grad.numpy() if p[name].grad is not None else np.zeros(p[name].shape)
        d = f["grads"][name][()].astype(np.float64)
        scale = np.abs(g).max()
        e = np.abs(g - d).max() / scale if scale > 0 else np.abs(d).max()
        worst = max(worst, e)
        flag = "" if e <= args.grad_tol else "  FAIL"
        print(f"{name:<24} {str(list(g.shape)):<14} {e:>16.3g}{flag}")
        ok &= e <= args.grad_tol
    print(("OK" if ok else "FAIL") + f": worst gradient error {worst:.3g} (tol {args.grad_tol:g})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
