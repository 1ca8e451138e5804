#!/usr/bin/python3
"""Read a meshloom checkpoint with h5py, independently of meshloom: print its
summary and verify every dataset against its checksum (the layout is in
docs/formats.md, "Checkpoint"; format 2's tensors carry block checksums).

Usage: read_checkpoint.py CKPT.h5 [--no-verify]
Exit status 1 when a checksum does not match or a dataset is missing.
"""
import sys

import h5py
import numpy as np

PRIME = 1099511628211
MASK = (1 << 64) - 1


def checksum(data: bytes) -> int:
    """FNV-1a over 64-bit little-endian words (last one zero-padded), then the byte count."""
    n = len(data)
    words = np.frombuffer(data + b"\0" * (-n % 8), dtype="<u8")
    h = 1469598103934665603
    for w in words.tolist():
        h = ((h ^ w) * PRIME) & MASK
    return ((h ^ n) * PRIME) & MASK


def mix64(z):
    """SplitMix64's finalizer on a uint64 array (wrapping arithmetic)."""
    z = z ^ (z >> np.uint64(30))
    z = z * np.uint64(0xBF58476D1CE4E5B9)
    z = z ^ (z >> np.uint64(27))
    z = z * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def block_checksum(values) -> int:
    """Format 2's tensor checksum: the sum mod 2^64 over elements of
    mix64(splitmix64(flat index) ^ the element's bits, zero-extended)."""
    flat = np.ascontiguousarray(values).reshape(-1)
    bits = flat.view(f"<u{flat.dtype.itemsize}").astype(np.uint64)
    index = np.arange(flat.size, dtype=np.uint64)
    with np.errstate(over="ignore"):
        terms = mix64(mix64(index + np.uint64(0x9E3779B97F4A7C15)) ^ bits)
        return int(terms.sum(dtype=np.uint64))


def raw(ds) -> bytes:
    v = ds[()]
    if isinstance(v, bytes):
        return v.rstrip(b"\0") if ds.dtype.kind == "S" else v
    return np.ascontiguousarray(v).tobytes()


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    verify = "--no-verify" not in sys.argv
    f = h5py.File(sys.argv[1], "r")
    step = int(f["meta/step"][()])
    params = sum(f["model"][k].size for k in f["model"])
    print(f"{sys.argv[1]}: format {int(f['meta/format'][()])}, step {step} (resume at {step + 1}), written by "
          f"{int(f['meta/trainers'][()])} trainers, seed {int(f['meta/seed'][()])}")
    print(f"  model: {len(f['model'])} tensors, {params} parameters; AdamW step {int(f['optim/step'][()])}")
    kind = f["data/lengths/kind"][()].decode()
    print(f"  data plane state: {f['data/plane'].size} bytes; document lengths: {kind}")
    if not verify:
        return 0
    tensor_sums = int(f["meta/format"][()]) == 2  # block checksums of the tensors
    bad = 0
    names = []
    f.visititems(lambda name, obj: names.append(name)
                 if isinstance(obj, h5py.Dataset) and not name.startswith("checksums/") else None)
    for name in names:
        key = "checksums/" + name.replace("/", "|")
        if key not in f:
            print(f"  MISSING checksum for /{name}")
            bad += 1
        elif tensor_sums and name.split("/")[0] in ("model", "optim") and name != "optim/step":
            if block_checksum(f[name][()]) != int(f[key][()]):
                print(f"  BAD /{name}: does not match its block checksum")
                bad += 1
        elif checksum(raw(f[name])) != int(f[key][()]):
            print(f"  BAD /{name}: does not match its checksum")
            bad += 1
    print(f"  verified {len(names)} datasets: {'all good' if not bad else f'{bad} bad'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
