#!/usr/bin/python3
"""Independent reader/writer for Megatron-LM indexed datasets (PREFIX.idx/.bin).

Ground truth for meshloom's C++ implementation (lib/data/indexed_dataset.*):
written from the published layout of megatron/core/datasets/indexed_dataset.py,
with numpy only, and sharing no code with meshloom.

.idx layout (little-endian):
  b"MMIDIDX\\x00\\x00"  <Q version (1)  <B dtype code  <Q sequence_count
  <Q document_count (= number of document indices = documents + 1)
  int32[sequence_count] sequence lengths
  int64[sequence_count] sequence pointers (byte offsets into .bin)
  int64[document_count] document indices
  int8[sequence_count]  sequence modes (optional, multimodal only)

Commands (exit status 0 on success, 1 with a message on any mismatch):
  info PREFIX                 validate and print the header as JSON
  dump PREFIX                 one line per sequence: its token ids, space-separated
  check-bytes [--eot N] PREFIX FILE...
                              sequence i must be the bytes of FILE i, then N
  write PREFIX --dtype D [--sequences-per-doc K]
                              write a dataset from stdin (one sequence per line)

Run with Debian's /usr/bin/python3 (it has numpy).
"""

import argparse
import json
import struct
import sys

import numpy as np

MAGIC = b"MMIDIDX\x00\x00"
DTYPES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64,
          6: np.float64, 7: np.float32, 8: np.uint16}
CODES = {np.dtype(v).name: k for k, v in DTYPES.items()}


class Bad(Exception):
    pass


def read_index(prefix):
    path = prefix + ".idx"
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:9] != MAGIC:
        raise Bad(f"{path}: wrong magic {raw[:9]!r}")
    if len(raw) < 34:
        raise Bad(f"{path}: truncated header ({len(raw)} bytes)")
    (version,) = struct.unpack_from("<Q", raw, 9)
    (code,) = struct.unpack_from("<B", raw, 17)
    seq_count, doc_count = struct.unpack_from("<QQ", raw, 18)
    if version != 1:
        raise Bad(f"{path}: version {version}")
    if code not in DTYPES:
        raise Bad(f"{path}: dtype code {code}")
    need = 34 + 4 * seq_count + 8 * seq_count + 8 * doc_count
    if len(raw) not in (need, need + seq_count):
        raise Bad(f"{path}: {len(raw)} bytes, counts need {need}")
    off = 34
    lengths = np.frombuffer(raw, dtype="<i4", count=seq_count, offset=off)
    off += lengths.nbytes
    pointers = np.frombuffer(raw, dtype="<i8", count=seq_count, offset=off)
    off += pointers.nbytes
    doc_idx = np.frombuffer(raw, dtype="<i8", count=doc_count, offset=off)
    return {"path": path, "version": version, "dtype_code": code,
            "dtype": np.dtype(DTYPES[code]).name, "sequence_count": seq_count,
            "document_count": doc_count, "lengths": lengths, "pointers": pointers,
            "document_indices": doc_idx}


def load(prefix):
    index = read_index(prefix)
    dtype = np.dtype(DTYPES[index["dtype_code"]]).newbyteorder("<")
    bin_data = np.memmap(prefix + ".bin", mode="r", dtype=np.uint8) \
        if index["sequence_count"] and index["lengths"].sum() else np.zeros(0, np.uint8)
    lengths, pointers = index["lengths"], index["pointers"]
    # Megatron writes pointers as the running sum of length * itemsize.
    expect = np.concatenate([[0], np.cumsum(lengths.astype(np.int64) * dtype.itemsize)[:-1]]) \
        if len(lengths) else np.zeros(0, np.int64)
    if not np.array_equal(pointers, expect):
        i = int(np.nonzero(pointers != expect)[0][0])
        raise Bad(f"{index['path']}: pointer {i} is {pointers[i]}, expected {expect[i]}")
    end = int(expect[-1] + lengths[-1] * dtype.itemsize) if len(lengths) else 0
    if end > len(bin_data):
        raise Bad(f"{prefix}.bin: {len(bin_data)} bytes, index needs {end}")
    docs = index["document_indices"]
    if len(docs) == 0 or docs[0] != 0 or docs[-1] != len(lengths) or np.any(np.diff(docs) < 0):
        raise Bad(f"{index['path']}: bad document indices")

    def sequence(i):
        start = int(pointers[i])
        return np.frombuffer(bin_data, dtype=dtype, count=int(lengths[i]), offset=start) \
            if lengths[i] else np.zeros(0, dtype)

    return index, sequence


def cmd_info(args):
    index, _ = load(args.prefix)
    lengths = index["lengths"]
    print(json.dumps({
        "version": index["version"], "dtype": index["dtype"],
        "sequence_count": index["sequence_count"],
        "document_count": index["document_count"],
        "documents": index["document_count"] - 1,
        "tokens": int(lengths.sum()),
    }))


def cmd_dump(args):
    index, sequence = load(args.prefix)
    out = sys.stdout
    for i in range(index["sequence_count"]):
        out.write(" ".join(str(int(t)) for t in sequence(i)))
        out.write("\n")


def cmd_check_bytes(args):
    index, sequence = load(args.prefix)
    if index["sequence_count"] != len(args.files):
        raise Bad(f"{args.prefix}: {index['sequence_count']} sequences, {len(args.files)} files")
    if index["document_count"] != len(args.files) + 1:
        raise Bad(f"{args.prefix}: document_count {index['document_count']}, "
                  f"expected {len(args.files) + 1}")
    for i, name in enumerate(args.files):
        with open(name, "rb") as f:
            want = list(f.read())
        if args.eot is not None:
            want.append(args.eot)
        got = [int(t) for t in sequence(i)]
        if got != want:
            k = next((k for k, (a, b) in enumerate(zip(got, want)) if a != b),
                     min(len(got), len(want)))
            raise Bad(f"sequence {i} ({name}) differs at token {k}: "
                      f"{got[k:k + 5]} vs expected {want[k:k + 5]} "
                      f"(lengths {len(got)} vs {len(want)})")
    print(f"ok: {len(args.files)} sequences match their files")


def cmd_write(args):
    dtype = np.dtype(args.dtype).newbyteorder("<")
    lines = [line.split() for line in sys.stdin.read().splitlines()]
    seqs = [np.array([int(t) for t in toks], dtype=dtype) for toks in lines]
    lengths = np.array([len(s) for s in seqs], dtype="<i4")
    pointers = np.concatenate([[0], np.cumsum(lengths.astype(np.int64) * dtype.itemsize)[:-1]]) \
        if len(seqs) else np.zeros(0)
    k = args.sequences_per_doc
    doc_idx = list(range(0, len(seqs), k)) + [len(seqs)]
    if len(seqs) == 0:
        doc_idx = [0]
    with open(args.prefix + ".bin", "wb") as f:
        for s in seqs:
            f.write(s.tobytes())
    with open(args.prefix + ".idx", "wb") as f:
        f.write(MAGIC)
        f.write(struct.pack("<Q", 1))
        f.write(struct.pack("<B", CODES[np.dtype(args.dtype).name]))
        f.write(struct.pack("<Q", len(seqs)))
        f.write(struct.pack("<Q", len(doc_idx)))
        f.write(lengths.tobytes())
        f.write(np.asarray(pointers, dtype="<i8").tobytes())
        f.write(np.asarray(doc_idx, dtype="<i8").tobytes())


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("info")
    a.add_argument("prefix")
    a.set_defaults(fn=cmd_info)
    a = sub.add_parser("dump")
    a.add_argument("prefix")
    a.set_defaults(fn=cmd_dump)
    a = sub.add_parser("check-bytes")
    a.add_argument("prefix")
    a.add_argument("--eot", type=int, default=None)
    a.add_argument("files", nargs="*")
    a.set_defaults(fn=cmd_check_bytes)
    a = sub.add_parser("write")
    a.add_argument("prefix")
    a.add_argument("--dtype", required=True, choices=sorted(CODES))
    a.add_argument("--sequences-per-doc", type=int, default=1)
    a.set_defaults(fn=cmd_write)
    args = p.parse_args()
    try:
        args.fn(args)
    except (Bad, OSError) as e:
        print(f"megatron_idx: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
