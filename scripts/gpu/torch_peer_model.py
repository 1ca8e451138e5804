#!/usr/bin/env python3
"""torch_peer_model.py: meshloom's model function in plain PyTorch, for torch_peer.py.

docs/design.md "The model", as torch code a user would write: the packed
batch (documents, positions restarting at 0, next-token targets inside each
document), causal attention within each document (varlen flash attention,
flex_attention with a document block mask, or SDPA / plain math with an
explicit mask), RMSNorm (eps 1e-5), rotate-half RoPE (theta 10000), GQA,
SwiGLU, tied or untied head, a chunked cross-entropy that never holds all
logits, meshloom's AdamW, and model::model_flops. Parameters keep meshloom's
names (`layers.0.wq`), so step dumps load as they are
(torch_peer_check.py). Works with torch 1.13 on the CPU (math attention, no
compile) and torch 2.x on CUDA.
"""
import math

import torch
import torch.nn.functional as F

NORM_EPS = 1e-5
ROPE_THETA = 10000.0

# ---- the batch: gpu_step_bench's documents and token ids -------------------------------

def long_tail(tokens):
    """gpu_step_bench's documents: half the tokens, then halving, at least 256 each."""
    lengths, left, length = [], tokens, tokens // 2
    while left > 0:
        lengths.append(min(length, left))
        left -= lengths[-1]
        length = max(length // 2, 256)
    return lengths


def mt19937(seed, count):
    """The first `count` outputs of C++'s std::mt19937(seed)."""
    mt = [seed & 0xFFFFFFFF]
    for i in range(1, 624):
        mt.append((1812433253 * (mt[-1] ^ (mt[-1] >> 30)) + i) & 0xFFFFFFFF)
    out, at = [], 624
    while len(out) < count:
        if at == 624:
            for i in range(624):
                y = (mt[i] & 0x80000000) | (mt[(i + 1) % 624] & 0x7FFFFFFF)
                mt[i] = mt[(i + 397) % 624] ^ (y >> 1) ^ (0x9908B0DF if y & 1 else 0)
            at = 0
        y = mt[at]
        at += 1
        y ^= y >> 11
        y ^= (y << 7) & 0x9D2C5680
        y ^= (y << 15) & 0xEFC60000
        y ^= y >> 18
        out.append(y)
    return out


class Batch:
    """Packed documents: token ids, next-token targets inside each document, positions
    restarting at 0, and what each attention implementation needs to stay inside one."""

    def __init__(self, tokens, lengths, device):
        self.lengths = [int(n) for n in lengths]
        self.tokens = torch.as_tensor(tokens, dtype=torch.long, device=device)
        n = len(self.tokens)
        ends = torch.tensor(self.lengths, device=device).cumsum(0)
        self.cu_seqlens = torch.cat([torch.zeros(1, dtype=torch.int32, device=device),
                                     ends.to(torch.int32)])
        self.doc = torch.repeat_interleave(torch.arange(len(self.lengths), device=device),
                                           torch.tensor(self.lengths, device=device))
        self.positions = torch.arange(n, device=device) - self.cu_seqlens[:-1].long()[self.doc]
        # Position t predicts t+1 when both are in its document: L-1 predictions each.
        has_next = torch.ones(n, dtype=torch.bool, device=device)
        has_next[ends - 1] = False
        self.predicting = has_next.nonzero().squeeze(1)
        self.targets = self.tokens[self.predicting + 1]
        self.max_len = max(self.lengths)

    def __len__(self):
        return len(self.tokens)


def rope_tables(positions, head_dim):
    """cos and sin [n, 1, D/2] of position * theta^(-2i/D), computed in float64 like
    meshloom's per-position table."""
    i = torch.arange(head_dim // 2, dtype=torch.float64, device=positions.device)
    angle = positions.to(torch.float64)[:, None] * ROPE_THETA ** (-2.0 * i / head_dim)
    return torch.cos(angle).float()[:, None, :], torch.sin(angle).float()[:, None, :]


# ---- attention inside documents -------------------------------------------------------

# Whether torch.compile is tracing: chosen once, so that compiled code calls a function
# the compiler knows rather than probing modules.
if hasattr(getattr(torch, "compiler", None), "is_compiling"):
    _compiling = torch.compiler.is_compiling
elif hasattr(getattr(torch, "_dynamo", None), "is_compiling"):
    _compiling = torch._dynamo.is_compiling
else:
    def _compiling():
        return False


def _repeat_kv(k, heads):
    """[n, KV, D] -> [n, heads, D]: query head j reads KV head j // (heads / KV)."""
    return k if k.shape[1] == heads else k.repeat_interleave(heads // k.shape[1], dim=1)


class Attention:
    """One implementation of causal attention within each packed document, q [n, H, D] and
    k, v [n, KV, D] in, [n, H, D] out. `prepare(batch)` makes its masks or metadata once."""

    def __init__(self, name, how, fn=None):
        self.name, self.how, self.fn = name, how, fn  # fn: the library's function
        self.extra = {}

    def prepare(self, batch, heads):
        self.heads = heads
        self.cu, self.max_len = batch.cu_seqlens, batch.max_len
        if self.name in ("sdpa", "math"):
            doc = batch.doc
            idx = torch.arange(len(doc), device=doc.device)
            self.mask = (doc[:, None] == doc[None, :]) & (idx[:, None] >= idx[None, :])
        if self.name == "flex":
            from torch.nn.attention.flex_attention import create_block_mask
            doc = batch.doc

            def same_document_causal(b, h, q, kv):
                return (doc[q] == doc[kv]) & (q >= kv)

            n = len(doc)
            # Compiled, the mask is made block by block; eager, it is n x n values at once.
            kw = {"_compile": True} if "_compile" in _parameters(create_block_mask) else {}
            self.block_mask = create_block_mask(same_document_causal, None, None, n, n,
                                                 device=doc.device, **kw)
            self.flex_compiled = torch.compile(self.fn)

    def __call__(self, q, k, v):
        return getattr(self, "_" + self.name)(q, k, v)

    def _varlen(self, q, k, v):
        if "enable_gqa" not in self.extra:
            k, v = _repeat_kv(k, q.shape[1]), _repeat_kv(v, q.shape[1])
        out = self.fn(q, k, v, self.cu, self.cu, self.max_len, self.max_len, **self.extra)
        return out[0] if isinstance(out, tuple) else out

    def _aten_flash(self, q, k, v):
        h = q.shape[1]
        return self.fn(q, _repeat_kv(k, h), _repeat_kv(v, h), self.cu, self.cu, self.max_len,
                       self.max_len, 0.0, True, False)[0]

    def _flex(self, q, k, v):
        gqa = k.shape[1] != q.shape[1]
        kw = {"enable_gqa": True} if gqa and "enable_gqa" in self.extra else {}
        if gqa and not kw:
            k, v = _repeat_kv(k, q.shape[1]), _repeat_kv(v, q.shape[1])
        flex = self.fn if _compiling() else self.flex_compiled  # eager flex would be O(n^2)
        out = flex(*(t.transpose(0, 1)[None] for t in (q, k, v)), block_mask=self.block_mask, **kw)
        return out[0].transpose(0, 1)

    def _sdpa(self, q, k, v):
        h = q.shape[1]
        out = F.scaled_dot_product_attention(
            *(t.transpose(0, 1)[None] for t in (q, _repeat_kv(k, h), _repeat_kv(v, h))),
            attn_mask=self.mask)
        return out[0].transpose(0, 1)

    def _math(self, q, k, v):
        h, d = q.shape[1], q.shape[2]
        q, k, v = (t.transpose(0, 1).float() for t in (q, _repeat_kv(k, h), _repeat_kv(v, h)))
        scores = (q @ k.transpose(1, 2)) / math.sqrt(d)
        p = torch.softmax(scores.masked_fill(~self.mask, float("-inf")), -1)
        return (p @ v).transpose(0, 1)


def _parameters(fn):
    import inspect
    try:
        return inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}


def attention_candidates(wanted, device, n):
    """The implementations to try, best first, each with what it is in this torch."""
    found = []
    if device.type == "cuda":
        try:
            from torch.nn.attention.varlen import varlen_attn
            params = _parameters(varlen_attn)
            a = Attention("varlen", "torch.nn.attention.varlen.varlen_attn", varlen_attn)
            if "is_causal" in params:
                a.extra["is_causal"] = True
            elif "window_size" in params:
                a.extra["window_size"] = (-1, 0)  # no key after the query: causal
            if "enable_gqa" in params:
                a.extra["enable_gqa"] = True
            if a.extra.get("is_causal") or "window_size" in a.extra:
                found.append(a)
        except ImportError:
            pass
        try:  # older torch raises RuntimeError, not AttributeError, for an unknown op
            found.append(Attention("aten_flash", "aten._flash_attention_forward with cu_seqlens",
                                   torch.ops.aten._flash_attention_forward))
        except (AttributeError, RuntimeError):
            pass
        try:
            from torch.nn.attention.flex_attention import flex_attention
            a = Attention("flex", "flex_attention with a document block mask", flex_attention)
            if "enable_gqa" in _parameters(flex_attention):
                a.extra["enable_gqa"] = True
            found.append(a)
        except ImportError:
            pass
    # An explicit n x n mask: small batches only.
    if hasattr(F, "scaled_dot_product_attention") and n <= 8192:
        found.append(Attention("sdpa", "scaled_dot_product_attention with an explicit mask"))
    if n <= 4096:
        found.append(Attention("math", "softmax(q k^T / sqrt(D)) v with an explicit mask"))
    if wanted != "auto":
        found = [a for a in found if a.name == wanted]
    return found


# ---- the model -------------------------------------------------------------------------

def rms_norm(x, gain):
    x = x.float()
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + NORM_EPS) * gain


def rope(x, cos, sin):
    """Rotate-half: dimension i pairs with i + D/2."""
    half = x.shape[-1] // 2
    a, b = x[..., :half].float(), x[..., half:].float()
    return torch.cat((a * cos - b * sin, b * cos + a * sin), -1).to(x.dtype)


def block(x, w, cos, sin, attend, heads, kv_heads):
    """One layer; w = (attn_norm, wq, wk, wv, wo, mlp_norm, w1, w3, w2)."""
    attn_norm, wq, wk, wv, wo, mlp_norm, w1, w3, w2 = w
    n, d = x.shape
    hd = d // heads
    h = rms_norm(x, attn_norm)
    q = rope(F.linear(h, wq).view(n, heads, hd), cos, sin)
    k = rope(F.linear(h, wk).view(n, kv_heads, hd), cos, sin)
    v = F.linear(h, wv).view(n, kv_heads, hd)
    x = x + F.linear(attend(q, k, v).reshape(n, heads * hd), wo)
    h = rms_norm(x, mlp_norm)
    return x + F.linear(F.silu(F.linear(h, w1)) * F.linear(h, w3), w2)


LAYER_NAMES = ("attn_norm", "wq", "wk", "wv", "wo", "mlp_norm", "w1", "w3", "w2")


class Shape:
    def __init__(self, vocab, d, layers, heads, kv_heads, ffn, tied):
        self.vocab, self.d, self.layers, self.heads = vocab, d, layers, heads
        self.kv_heads, self.ffn, self.tied = kv_heads, ffn, tied
        self.head_dim = d // heads
        if d % heads or heads % kv_heads or self.head_dim % 2:
            raise ValueError(f"d {d}, heads {heads}, kv_heads {kv_heads}: meshloom needs "
                             "d = heads x an even head size and heads a multiple of kv_heads")

    def tensors(self):
        """meshloom's parameter names and shapes (docs/design.md "The model")."""
        d, q, kv, f = self.d, self.heads * self.head_dim, self.kv_heads * self.head_dim, self.ffn
        out = [("embed", (self.vocab, d))]
        for i in range(self.layers):
            out += [(f"layers.{i}.{k}", s) for k, s in
                    zip(LAYER_NAMES, [(d,), (q, d), (kv, d), (kv, d), (d, q), (d,), (f, d),
                                      (f, d), (d, f)])]
        out.append(("final_norm", (d,)))
        if not self.tied:
            out.append(("lm_head", (self.vocab, d)))
        return out


class Model(torch.nn.Module):
    """The parameters under meshloom's names (flat: `layers.0.wq` is one attribute name)."""

    def __init__(self, shape, device):
        super().__init__()
        self.shape = shape
        self.names = [name for name, _ in shape.tensors()]
        self.flat = torch.nn.ParameterList()
        for name, dims in shape.tensors():
            self.flat.append(torch.nn.Parameter(torch.empty(dims, device=device)))
        self.layer_fn = block

    def named_weights(self):
        return list(zip(self.names, self.flat))

    def weight(self, name):
        return self.flat[self.names.index(name)]

    def init(self, seed=1234):
        """N(0, 0.02^2), wo and w2 N(0, (0.02 / sqrt(2 layers))^2), norm gains 1."""
        g = torch.Generator(device=self.flat[0].device).manual_seed(seed)
        with torch.no_grad():
            for name, p in self.named_weights():
                if name.endswith("norm"):
                    p.fill_(1.0)
                else:
                    std = 0.02 / (math.sqrt(2 * self.shape.layers)
                                  if name.endswith((".wo", ".w2")) else 1.0)
                    p.normal_(0.0, std, generator=g)

    def loss(self, batch, attend, cos, sin, chunk, dtype):
        """Mean -log p of the batch's predictions."""
        s = self.shape
        x = F.embedding(batch.tokens, self.weight("embed"))
        per_layer = len(LAYER_NAMES)
        for i in range(s.layers):
            w = tuple(self.flat[1 + i * per_layer + j] for j in range(per_layer))
            x = self.layer_fn(x, w, cos, sin, attend, s.heads, s.kv_heads)
        h = rms_norm(x, self.weight("final_norm"))[batch.predicting]
        head = self.weight("embed" if s.tied else "lm_head")
        total = ChunkedCrossEntropy.apply(h, head, batch.targets, chunk, dtype)
        return total / len(batch.targets)


class ChunkedCrossEntropy(torch.autograd.Function):
    """Sum over rows of -log softmax(h W^T)[target], `chunk` rows of logits at a time; the
    gradients are made in the same pass (softmax - one-hot), so backward only scales them."""

    @staticmethod
    def forward(ctx, h, weight, targets, chunk, dtype):
        w, hc = weight.to(dtype), h.to(dtype)
        grad_h = torch.empty_like(hc)
        grad_w = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device)
        total = torch.zeros((), dtype=torch.float64, device=h.device)
        for s in range(0, len(hc), chunk):
            e = min(s + chunk, len(hc))
            logits = (hc[s:e] @ w.t()).float()
            t = targets[s:e, None]
            lse = torch.logsumexp(logits, -1, keepdim=True)
            total += (lse - logits.gather(1, t)).sum(dtype=torch.float64)
            g = torch.exp(logits - lse)
            g.scatter_add_(1, t, -torch.ones_like(t, dtype=g.dtype))
            g = g.to(dtype)
            grad_h[s:e] = g @ w
            grad_w += (g.t() @ hc[s:e]).float()
        ctx.save_for_backward(grad_h, grad_w)
        ctx.dtypes = (h.dtype, weight.dtype)
        return total

    @staticmethod
    def backward(ctx, grad_total):
        grad_h, grad_w = ctx.saved_tensors
        scale = grad_total.float()
        return ((grad_h.float() * scale).to(ctx.dtypes[0]), (grad_w * scale).to(ctx.dtypes[1]),
                None, None, None)


def adamw(model, lr, device):
    """meshloom's AdamW: decay on matrices (embed and lm_head too), none on norm gains."""
    decay = [p for n, p in model.named_weights() if not n.endswith("norm")]
    gains = [p for n, p in model.named_weights() if n.endswith("norm")]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": gains, "weight_decay": 0.0}]
    kw = dict(lr=lr, betas=(0.9, 0.95), eps=1e-8)
    if device.type == "cuda":
        try:
            return torch.optim.AdamW(groups, fused=True, **kw), "fused"
        except (TypeError, RuntimeError):
            pass
    return torch.optim.AdamW(groups, **kw), "default"


def model_flops(shape, lengths):
    """model::model_flops: 3 x (linear products x tokens + causal attention within
    documents), the forward's 2 FLOPs per multiply-add, backward twice that."""
    s, d = shape, float(shape.d)
    q_dim, kv_dim = s.heads * s.head_dim, s.kv_heads * s.head_dim
    per_layer = 2.0 * (d * (q_dim + 2 * kv_dim) + q_dim * d + 3.0 * d * s.ffn)
    linear = per_layer * s.layers + 2.0 * d * s.vocab
    visible = sum(n * (n + 1) / 2.0 for n in lengths)  # keys each query sees
    return 3.0 * (linear * sum(lengths) + 4.0 * q_dim * visible * s.layers)
