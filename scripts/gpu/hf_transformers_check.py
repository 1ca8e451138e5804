#!/usr/bin/env python3
"""transformers loads meshloom's export and computes what meshloom computed.

  hf_transformers_check.py ORIGINAL_DIR EXPORT_DIR [DUMP.h5]

ORIGINAL_DIR is a Hugging Face Llama checkpoint (tests/data/make_hf_llama.py),
EXPORT_DIR what `meshloom import-hf` then `meshloom export-hf` made of it, and
DUMP.h5 the first step's dump of a run with model.init: hf:ORIGINAL_DIR.
Checks, printing one line each, exit 1 when one fails:
  load:   LlamaForCausalLM.from_pretrained(EXPORT_DIR) logs no missing,
          unexpected or newly initialized weights;
  logits: the export's logits equal the original's on the same ids (the
          same weights, bit for bit);
  loss:   with h5py and DUMP.h5, transformers' mean loss over the dump's
          samples (float64, each sample one sequence) equals the dump's
          /loss within 1e-5 relative.
Runs on the lent GPU machine (transformers is not in Debian): run.sh's part hf.
"""
import io
import logging
import sys

import torch
import transformers


def load(folder):
    """The model in float64, and what transformers logged while loading it."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger = transformers.utils.logging.get_logger("transformers")
    logger.addHandler(handler)
    transformers.utils.logging.set_verbosity_warning()
    try:
        model = transformers.LlamaForCausalLM.from_pretrained(folder, torch_dtype=torch.float64)
    finally:
        logger.removeHandler(handler)
    return model.eval(), stream.getvalue()


def main():
    original, export = sys.argv[1], sys.argv[2]
    dump = sys.argv[3] if len(sys.argv) > 3 else None
    ok = True
    model, log = load(export)
    bad = [w for w in ("missing", "unexpected", "newly initialized", "not initialized")
           if w in log.lower()]
    print(f"load: {'FAIL ' + str(bad) + ': ' + log.strip() if bad else 'ok, no warnings'}")
    ok &= not bad
    reference, _ = load(original)
    ids = torch.arange(40).remainder(model.config.vocab_size)[None, :]
    with torch.no_grad():
        same = torch.equal(model(ids).logits, reference(ids).logits)
    print(f"logits: {'ok, identical to the original' if same else 'FAIL: differ'}")
    ok &= same
    if dump:
        try:
            import h5py
        except ImportError:
            print("loss: skipped (no h5py here)")
            return 0 if ok else 1
        f = h5py.File(dump, "r")
        tokens = torch.tensor(f["batch/tokens"][()], dtype=torch.long)
        total, count, at = 0.0, 0, 0
        with torch.no_grad():
            for n in f["batch/sample_lengths"][()].tolist():
                seq = tokens[at:at + n][None, :]
                logp = torch.log_softmax(reference(seq).logits[0, :-1], -1)
                total += -logp.gather(1, seq[0, 1:, None]).sum().item()
                count, at = count + n - 1, at + n
        loss, dumped = total / count, float(f["loss"][()])
        err = abs(loss - dumped) / abs(loss)
        print(f"loss: transformers {loss:.10g} meshloom {dumped:.10g} error {err:.3g} "
              f"{'ok' if err <= 1e-5 else 'FAIL'} (tol 1e-5)")
        ok &= err <= 1e-5
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
