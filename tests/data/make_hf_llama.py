#!/usr/bin/python3
"""Writes a tiny random Hugging Face Llama checkpoint, as save_pretrained would.

Independent of meshloom: numpy only, the safetensors format written by hand
(8-byte little-endian header size, JSON header, data buffer). Next to the
checkpoint it writes what a reader must find, in a format of its own:
expected.f32 (every tensor's values as little-endian float32, in the order
of expected.txt) and expected.txt ("NAME DTYPE D0xD1... OFFSET COUNT" a line).

usage: make_hf_llama.py OUT_DIR [--dtype bf16|f16|f32] [--tied] [--shards N]
                        [--seed S] [--d-model D] [--vocab V] [--theta T]
                        [--eps E] [--rope-scaling none|linear|llama3]
                        [--std S]

--std S: matrices N(0, S^2) and norm gains 1 + N(0, S^2), as a trained model's
(default: everything N(0, 1)).
--rope-scaling linear has factor 2; llama3 has factor 4, low_freq_factor 1,
high_freq_factor 4 and original_max_position_embeddings 64 (with head size 8
and theta 10000, one frequency of each head is kept, one blended, two divided).
"""
import argparse
import json
import os

import numpy as np


def to_bf16_bits(x):
    """float32 -> bfloat16 bits, round to nearest even (no NaNs here)."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    r = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return r.astype(np.uint16)


def encode(x, dtype):
    """(stored bytes, the float32 values a reader must get back)."""
    if dtype == "f32":
        v = x.astype("<f4")
        return v.tobytes(), v
    if dtype == "f16":
        v = x.astype("<f2")
        return v.tobytes(), v.astype(np.float32)
    bits = to_bf16_bits(x).astype("<u2")
    back = (bits.astype(np.uint32) << 16).view(np.float32)
    return bits.tobytes(), back


def write_safetensors(path, tensors, dtype, metadata):
    header = {"__metadata__": metadata}
    buf = bytearray()
    for name, arr in tensors:
        data, _ = encode(arr, dtype)
        header[name] = {"dtype": {"f32": "F32", "f16": "F16", "bf16": "BF16"}[dtype],
                        "shape": list(arr.shape),
                        "data_offsets": [len(buf), len(buf) + len(data)]}
        buf += data
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text + bytes(buf))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f16", "f32"])
    ap.add_argument("--tied", action="store_true")
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--d-model", type=int, default=16)
    ap.add_argument("--vocab", type=int, default=40)
    ap.add_argument("--theta", type=float, default=500000.0)
    ap.add_argument("--eps", type=float, default=1e-05)
    ap.add_argument("--rope-scaling", default="none", choices=["none", "linear", "llama3"])
    ap.add_argument("--std", type=float, default=0)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    d, layers, heads, kv_heads, ffn, vocab = a.d_model, 2, 4, 2, 24, a.vocab
    scaling = {"none": None, "linear": {"rope_type": "linear", "factor": 2.0},
               "llama3": {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0,
                          "high_freq_factor": 4.0, "original_max_position_embeddings": 64}}
    hd = d // heads
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": d, "num_hidden_layers": layers, "num_attention_heads": heads,
        "num_key_value_heads": kv_heads, "intermediate_size": ffn, "vocab_size": vocab,
        "rms_norm_eps": a.eps, "rope_theta": a.theta, "tie_word_embeddings": a.tied,
        "max_position_embeddings": 128, "rope_scaling": scaling[a.rope_scaling],
        "hidden_act": "silu",
        "attention_bias": False, "mlp_bias": False, "torch_dtype": "bfloat16",
        "bos_token_id": 1, "eos_token_id": 2, "pretraining_tp": 1,
    }
    shapes = [("model.embed_tokens.weight", (vocab, d))]
    for i in range(layers):
        p = f"model.layers.{i}."
        shapes += [(p + "self_attn.q_proj.weight", (heads * hd, d)),
                   (p + "self_attn.k_proj.weight", (kv_heads * hd, d)),
                   (p + "self_attn.v_proj.weight", (kv_heads * hd, d)),
                   (p + "self_attn.o_proj.weight", (d, heads * hd)),
                   (p + "mlp.gate_proj.weight", (ffn, d)),
                   (p + "mlp.up_proj.weight", (ffn, d)),
                   (p + "mlp.down_proj.weight", (d, ffn)),
                   (p + "input_layernorm.weight", (d,)),
                   (p + "post_attention_layernorm.weight", (d,))]
    shapes.append(("model.norm.weight", (d,)))
    if not a.tied:
        shapes.append(("lm_head.weight", (vocab, d)))
    def values(name, shape):
        x = rng.standard_normal(shape)
        if a.std > 0:
            x = (1 + a.std * x) if len(shape) == 1 else a.std * x
        return x.astype(np.float32)

    tensors = [(n, values(n, s)) for n, s in shapes]

    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    meta = {"format": "pt"}
    if a.shards == 1:
        write_safetensors(os.path.join(a.out, "model.safetensors"), tensors, a.dtype, meta)
    else:
        weight_map = {}
        per = -(-len(tensors) // a.shards)
        for s in range(a.shards):
            name = f"model-{s + 1:05d}-of-{a.shards:05d}.safetensors"
            part = tensors[s * per:(s + 1) * per]
            write_safetensors(os.path.join(a.out, name), part, a.dtype, meta)
            weight_map.update({n: name for n, _ in part})
        with open(os.path.join(a.out, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f, indent=2)

    offset = 0
    with open(os.path.join(a.out, "expected.f32"), "wb") as vals, \
            open(os.path.join(a.out, "expected.txt"), "w") as index:
        for name, arr in tensors:
            _, back = encode(arr, a.dtype)
            vals.write(back.astype("<f4").tobytes())
            dims = "x".join(str(n) for n in arr.shape)
            index.write(f"{name} {a.dtype} {dims} {offset} {arr.size}\n")
            offset += arr.size


if __name__ == "__main__":
    main()
