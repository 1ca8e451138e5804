#!/usr/bin/python3
"""Checks a step dump of a run started from a Hugging Face checkpoint against
torch's Hugging Face Llama forward on that checkpoint.

  hf_llama_reference.py HF_DIR DUMP.h5 [--break WHAT]

HF_DIR holds config.json and model.safetensors (or its index); DUMP.h5 is
`meshloom train --dump-step N` of a run with model.init: hf:HF_DIR, dumped at
its first step. Written from the published LlamaForCausalLM definition, not
from meshloom: the tensors are read by name from the safetensors files (numpy
only), the model is embed_tokens, per layer input_layernorm -> self_attn
(q/k/v/o_proj, rotate_half RoPE with the inv_freq of rope_theta and
rope_scaling linear or llama3, repeat_kv for GQA, causal softmax) ->
residual -> post_attention_layernorm -> mlp (down(silu(gate) * up)) ->
residual, then norm and lm_head (embed_tokens when tie_word_embeddings).
RMSNorm uses config.json's rms_norm_eps. Each sample of the dump's batch is
one sequence with positions 0.. (HF's position_ids), and position t predicts
token t+1; the loss is the mean over all predictions. float64 throughout.

Checks, and exits 1 when one fails:
  params: the dump's parameters equal the checkpoint's tensors (as float32)
  loss:   |loss - /loss| / |loss|                    <= 1e-5
  grads:  max|g_torch - g_dump| / max|g_torch|       <= 1e-5 per tensor
--break WHAT plants a bug in this reference to show that the check catches
it: scaling (rope_scaling ignored), eps (rms_norm_eps 1e-5 instead of the
config's), kv (query head j reads KV head j % KV).

Debian's /usr/bin/python3 with python3-torch, python3-h5py.
"""
import argparse
import json
import math
import os
import sys

import h5py
import numpy as np
import torch

TOL = 1e-5


def read_safetensors(path):
    raw = open(path, "rb").read()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    buf = raw[8 + n:]
    out = {}
    for name, e in header.items():
        b, f = e["data_offsets"]
        data = buf[b:f]
        if e["dtype"] == "F32":
            a = np.frombuffer(data, "<f4")
        elif e["dtype"] == "F16":
            a = np.frombuffer(data, "<f2").astype(np.float32)
        elif e["dtype"] == "BF16":
            a = (np.frombuffer(data, "<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            raise SystemExit(f"{path}: {name}: dtype {e['dtype']}")
        out[name] = a.reshape(e["shape"])
    return out


def read_checkpoint(folder):
    index = os.path.join(folder, "model.safetensors.index.json")
    files = sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(
        index) else ["model.safetensors"]
    tensors = {}
    for f in files:
        tensors.update(read_safetensors(os.path.join(folder, f)))
    return tensors


def inv_freq(cfg, dim, broken):
    """HF's rotary inverse frequencies, after rope_scaling (linear, llama3)."""
    freq = 1.0 / cfg["rope_theta"] ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    s = cfg.get("rope_scaling") or {}
    kind = s.get("rope_type", s.get("type"))
    if broken == "scaling" or kind in (None, "default"):
        return freq
    if kind == "linear":
        return freq / s["factor"]
    assert kind == "llama3", kind
    factor, low, high = s["factor"], s["low_freq_factor"], s["high_freq_factor"]
    old = s["original_max_position_embeddings"]
    wavelen = 2 * math.pi / freq
    scaled = torch.where(wavelen > old / low, freq / factor, freq)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < old / high) & ~(wavelen > old / low)
    return torch.where(medium, smoothed, scaled)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), -1)


def rms_norm(x, w, eps):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def sequence_loss(ids, w, cfg, broken):
    """Sum of -log p(ids[t+1] | ids[..t]) over the sequence, and the count."""
    n = len(ids)
    H, KV = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    d = cfg["hidden_size"]
    hd = d // H
    eps = 1e-5 if broken == "eps" else cfg["rms_norm_eps"]
    freqs = torch.arange(n, dtype=torch.float64)[:, None] * inv_freq(cfg, hd, broken)[None, :]
    emb = torch.cat((freqs, freqs), -1)
    cos, sin = emb.cos(), emb.sin()
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    x = w["model.embed_tokens.weight"][ids]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q = (h @ w[p + "self_attn.q_proj.weight"].T).view(n, H, hd).transpose(0, 1)
        k = (h @ w[p + "self_attn.k_proj.weight"].T).view(n, KV, hd).transpose(0, 1)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).view(n, KV, hd).transpose(0, 1)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        kv = torch.arange(H) // (H // KV) if broken != "kv" else torch.arange(H) % KV
        k, v = k[kv], v[kv]  # repeat_kv
        scores = (q @ k.transpose(1, 2) / math.sqrt(hd)).masked_fill(~causal, float("-inf"))
        a = (torch.softmax(scores, -1) @ v).transpose(0, 1).reshape(n, H * hd)
        x = x + a @ w[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        gate = torch.nn.functional.silu(h @ w[p + "mlp.gate_proj.weight"].T)
        x = x + (gate * (h @ w[p + "mlp.up_proj.weight"].T)) @ w[p + "mlp.down_proj.weight"].T
    head = w["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings") else w["lm_head.weight"]
    logits = rms_norm(x, w["model.norm.weight"], eps) @ head.T
    logp = torch.log_softmax(logits[:-1], -1)
    return -logp.gather(1, ids[1:, None]).sum(), n - 1


def meshloom_name(hf):
    """The dump's name of an HF tensor (docs/formats.md, Hugging Face checkpoints)."""
    fixed = {"model.embed_tokens.weight": "embed", "model.norm.weight": "final_norm",
             "lm_head.weight": "lm_head"}
    if hf in fixed:
        return fixed[hf]
    parts = hf.split(".")  # model.layers.I.<module>.<proj>.weight
    short = {"input_layernorm": "attn_norm", "post_attention_layernorm": "mlp_norm",
             "q_proj": "wq", "k_proj": "wk", "v_proj": "wv", "o_proj": "wo",
             "gate_proj": "w1", "up_proj": "w3", "down_proj": "w2"}
    return f"layers.{parts[2]}." + short[parts[-2]]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("hf_dir")
    ap.add_argument("dump")
    ap.add_argument("--break", dest="broken", choices=["scaling", "eps", "kv"])
    args = ap.parse_args()
    cfg = json.load(open(os.path.join(args.hf_dir, "config.json")))
    stored = read_checkpoint(args.hf_dir)
    f = h5py.File(args.dump, "r")
    ok = True
    for hf, values in stored.items():
        name = meshloom_name(hf)
        if name == "lm_head" and cfg.get("tie_word_embeddings"):
            continue
        if not np.array_equal(f["params"][name][()], values):
            print(f"FAIL: the dump's {name} is not the checkpoint's {hf}")
            ok = False
    w = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in stored.items()}
    tokens = torch.tensor(f["batch/tokens"][()], dtype=torch.long)
    total, count, at = 0.0, 0, 0
    for length in f["batch/sample_lengths"][()].tolist():
        s, c = sequence_loss(tokens[at:at + length], w, cfg, args.broken)
        total, count, at = total + s, count + c, at + length
    loss = total / count
    loss.backward()
    dumped = float(f["loss"][()])
    err = abs(loss.item() - dumped) / abs(loss.item())
    print(f"{count} predictions; loss: torch {loss.item():.10g} dump {dumped:.10g} "
          f"error {err:.3g} (tol {TOL:g})")
    ok &= err <= TOL
    worst = 0.0
    for hf, t in w.items():
        name = meshloom_name(hf)
        if name == "lm_head" and cfg.get("tie_word_embeddings"):
            continue
        g = t.grad.numpy()
        d = f["grads"][name][()].astype(np.float64)
        e = np.abs(g - d).max() / np.abs(g).max()
        worst = max(worst, e)
        print(f"{name:<18} {hf:<44} {e:.3g}{'  FAIL' if e > TOL else ''}")
        ok &= e <= TOL
    print(("OK" if ok else "FAIL") + f": worst gradient error {worst:.3g} (tol {TOL:g})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
