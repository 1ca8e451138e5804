#!/usr/bin/env python3
"""torch_peer.py: meshloom's GPU step benchmark (scripts/bench/src/gpu_step_bench.cpp) in plain PyTorch.

What a user would run instead of meshloom, measured the same way: the model
function of docs/design.md "The model" (RMSNorm eps 1e-5, rotate-half RoPE
theta 10000, GQA, SwiGLU, untied head unless --tied, mean -log p over each
document's L-1 next-token predictions) at gpu_step_bench's shape (d 2048, 16
layers, 16 heads, ffn 5504, vocab 50257: 1.015B parameters), on its packed
32,768 tokens (the same long-tail documents and the same std::mt19937(7)
token ids), with its optimizer (AdamW beta 0.9/0.95, eps 1e-8, weight decay
0.1 on matrices only, lr 1e-4, gradient norm clipped at 1; fused on CUDA),
bf16 autocast over fp32 master weights, document-masked causal attention
(varlen flash attention where this torch has it, else flex_attention with a
document block mask, else SDPA or plain math with an explicit mask for small
batches), a chunked cross-entropy that never holds all logits, and
torch.compile on each transformer block. Model FLOPs (model::model_flops)
over the best step's wall time; MFU against the published bf16 dense peak
meshloom uses (989.4 TFLOP/s for an H100 or H200) and against a measured
8192^3 bf16 product.

  torch_peer.py                         the benchmark (CUDA), best of 10 steps
  torch_peer.py --device cpu --tiny     a tiny model on the CPU, to check the script
  torch_peer.py --json FILE             also writes the results as JSON
Options: --tokens --d --layers --heads --kv-heads --ffn --vocab --docs L1,L2,..
--tied --steps --warmup --time-budget SECONDS --attention NAME --no-compile
--loss-chunk --precision bf16|fp32.

Prints key=value lines (bench_step_gpu.sh reads them). Exits 77 where it
cannot run (no torch, or no CUDA device for --device cuda), 1 on failure.
scripts/gpu/torch_peer_check.py checks this model, loss and optimizer against
meshloom's step dumps.
"""
import argparse
import json
import math
import sys
import time

SKIP = 77
try:
    import torch
except Exception as e:  # noqa: BLE001: ImportError, or OSError from a library torch loads
    print(f"torch_peer: skipped: no torch in {sys.executable} ({type(e).__name__}: {e})")
    sys.exit(SKIP)

from torch_peer_model import (Batch, Model, adamw, attention_candidates, block,  # noqa: E402
                              long_tail, model_flops, mt19937, rope_tables, Shape)

PUBLISHED_BF16_PEAK = 989.4e12  # H100 / H200 SXM, dense: gpu_step_bench's figure


# ---- the benchmark ---------------------------------------------------------------------

def measured_peak(device):
    """Best bf16 8192^3 product of uniform [-1, 1) values (as gpu_step_bench measures)."""
    n = 8192
    a = torch.rand(n, n, device=device, dtype=torch.bfloat16) * 2 - 1
    b = torch.rand(n, n, device=device, dtype=torch.bfloat16) * 2 - 1
    best = 0.0
    for rep in range(6):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        torch.mm(a, b)
        torch.cuda.synchronize()
        if rep:
            best = max(best, 2.0 * n ** 3 / (time.perf_counter() - t0))
    return best


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def one_step(model, opt, batch, attend, tables, args, device):
    """Forward (the loss read back), backward, clip at norm 1, AdamW: seconds at each end."""
    opt.zero_grad(set_to_none=True)
    sync(device)
    t0 = time.perf_counter()
    dtype = torch.bfloat16 if args.precision == "bf16" else torch.float32
    with torch.autocast(device_type=device.type, dtype=torch.bfloat16,
                        enabled=args.precision == "bf16"):
        loss = model.loss(batch, attend, *tables, args.loss_chunk, dtype)
    value = loss.item()
    t_f = time.perf_counter()
    loss.backward()
    sync(device)
    t_fb = time.perf_counter()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    sync(device)
    t_end = time.perf_counter()
    return value, t_end - t0, t_fb - t0, t_f - t0


def first_line(e):
    text = f"{type(e).__name__}: {e}".strip().splitlines()
    return text[0][:200] if text else type(e).__name__


def warm_up(model, opt, batch, tables, args, device, start):
    """Tries the attention implementations (best first), compiled then eager, until one
    runs the warm-up steps. Returns (attention, compiled) and prints what failed."""
    candidates = attention_candidates(args.attention, device, len(batch))
    if not candidates:
        raise RuntimeError(f"no attention implementation '{args.attention}' for "
                           f"{len(batch)} tokens on {device.type} in torch {torch.__version__}")
    can_compile = hasattr(torch, "compile") and not args.no_compile
    for attend in candidates:
        for compiled in ([True, False] if can_compile else [False]):
            try:
                attend.prepare(batch, model.shape.heads)
                model.layer_fn = torch.compile(block, dynamic=False) if compiled else block
                for i in range(args.warmup):
                    loss, secs, _, _ = one_step(model, opt, batch, attend, tables, args, device)
                    print(f"warm-up {i + 1}: {attend.name}{' compiled' if compiled else ''}, "
                          f"{secs:.3f} s, loss {loss:.4f} ({time.monotonic() - start:.0f} s in)",
                          flush=True)
                return attend, compiled
            except Exception as e:  # noqa: BLE001: any failure moves on to the next way
                print(f"note: {attend.name}{' compiled' if compiled else ''} failed: "
                      f"{first_line(e)}", flush=True)
                opt.zero_grad(set_to_none=True)
                if compiled and hasattr(torch, "_dynamo"):
                    torch._dynamo.reset()
                if device.type == "cuda":
                    torch.cuda.empty_cache()
    raise RuntimeError("every attention implementation failed (notes above)")


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--tiny", action="store_true",
                    help="a tiny GQA model on 512 tokens in 5 documents (checks the script)")
    ap.add_argument("--tokens", type=int, default=32768)
    ap.add_argument("--d", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--kv-heads", type=int, default=16)
    ap.add_argument("--ffn", type=int, default=5504)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--docs", help="document lengths L1,L2,... (default: gpu_step_bench's mix)")
    ap.add_argument("--tied", action="store_true", help="embed as the LM head (default untied)")
    ap.add_argument("--steps", type=int, default=10, help="measured steps (the best counts)")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--time-budget", type=float, default=90.0,
                    help="seconds for everything, compilation included: fewer measured steps "
                         "past it (at least one)")
    ap.add_argument("--attention", default="auto",
                    choices=["auto", "varlen", "aten_flash", "flex", "sdpa", "math"])
    ap.add_argument("--no-compile", action="store_true", help="eager blocks")
    ap.add_argument("--loss-chunk", type=int, default=4096, help="rows of logits at once")
    ap.add_argument("--precision", choices=["bf16", "fp32"],
                    help="bf16: autocast over fp32 weights (default on CUDA); fp32 (CPU's)")
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args(argv)
    if args.tiny:
        args.tokens, args.d, args.layers, args.heads, args.kv_heads = 512, 64, 2, 4, 2
        args.ffn, args.vocab, args.docs, args.loss_chunk = 128, 512, "200,160,80,48,24", 128
    if args.precision is None:
        args.precision = "bf16" if args.device == "cuda" else "fp32"
    return args


def run(args):
    start = time.monotonic()
    if args.device == "cuda" and not torch.cuda.is_available():
        print(f"torch_peer: skipped: torch {torch.__version__} sees no CUDA device "
              "(--device cpu --tiny runs on the CPU)")
        return SKIP
    device = torch.device(args.device)
    shape = Shape(args.vocab, args.d, args.layers, args.heads, args.kv_heads, args.ffn, args.tied)
    lengths = [int(x) for x in args.docs.split(",")] if args.docs else long_tail(args.tokens)
    tokens = [t % args.vocab for t in mt19937(7, sum(lengths))]
    batch = Batch(tokens, lengths, device)
    tables = rope_tables(batch.positions, shape.head_dim)
    model = Model(shape, device)
    model.init()
    opt, opt_kind = adamw(model, args.lr, device)
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    peak = measured_peak(device) if device.type == "cuda" else 0.0
    attend, compiled = warm_up(model, opt, batch, tables, args, device, start)

    best = (math.inf, math.inf, math.inf)
    loss, measured = 0.0, 0
    while measured < args.steps:
        loss, step, fb, f = one_step(model, opt, batch, attend, tables, args, device)
        best = min(best, (step, fb, f))
        measured += 1
        if time.monotonic() - start + step > args.time_budget:
            print(f"time budget {args.time_budget:.0f} s reached after {measured} steps",
                  flush=True)
            break
    step, fb, f = best
    flops = model_flops(shape, lengths)
    nparams = sum(p.numel() for p in model.parameters())
    published = PUBLISHED_BF16_PEAK if ("H100" in gpu or "H200" in gpu) else 0.0
    r = {"gpu": gpu, "torch": torch.__version__, "attention": attend.name,
         "attention_how": attend.how, "compile": "block" if compiled else "off",
         "precision": "bf16-autocast" if args.precision == "bf16" else "fp32",
         "optimizer": f"AdamW-{opt_kind}", "params": nparams, "tokens": len(batch),
         "documents": len(lengths), "steps_measured": measured, "step_seconds": step,
         "forward_backward_seconds": fb, "forward_seconds": f, "optimizer_seconds": step - fb,
         "tokens_per_second": len(batch) / step, "tflops": flops / step / 1e12, "loss": loss,
         "model_flops": flops, "seconds_total": time.monotonic() - start}
    if peak:
        r.update(measured_peak_tflops=peak / 1e12, mfu_measured_peak=flops / step / peak)
    if published:
        r.update(published_peak_tflops=published / 1e12, mfu=flops / step / published)
    report(r, args.json)
    return 0


def report(r, json_path):
    print(f"gpu={r['gpu']}")
    print(f"torch={r['torch']} attention={r['attention']} compile={r['compile']} "
          f"precision={r['precision']} optimizer={r['optimizer']}")
    print(f"attention_how={r['attention_how'].replace(' ', '_')}")
    print(f"params={r['params'] / 1e9:.3f}B tokens={r['tokens']} documents={r['documents']} "
          f"steps_measured={r['steps_measured']}")
    print(f"step_seconds={r['step_seconds']:.4f} "
          f"forward_backward_seconds={r['forward_backward_seconds']:.4f} "
          f"forward_seconds={r['forward_seconds']:.4f} "
          f"optimizer_seconds={r['optimizer_seconds']:.4f}")
    print(f"step_ms={1e3 * r['step_seconds']:.1f} tokens_per_second={r['tokens_per_second']:.0f} "
          f"tflops={r['tflops']:.1f} loss={r['loss']:.4f}")
    if "measured_peak_tflops" in r:
        print(f"measured_peak_tflops={r['measured_peak_tflops']:.1f} "
              f"mfu_measured_peak={r['mfu_measured_peak']:.3f}")
    if "mfu" in r:
        print(f"published_peak_tflops={r['published_peak_tflops']:.1f} mfu={r['mfu']:.3f}")
    if json_path:
        with open(json_path, "w") as f:
            json.dump(r, f, indent=1)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return run(args)
    except Exception as e:  # noqa: BLE001: one clear line, then the trace for the log
        import traceback
        traceback.print_exc()
        print(f"torch_peer: failed: {first_line(e)}", flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
