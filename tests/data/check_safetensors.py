#!/usr/bin/python3
"""Checks two .safetensors files a writer made from the same tensors, one F32
and one BF16, with nothing but numpy and the format's definition: each header
parses, offsets are contiguous from 0 and cover the buffer, the buffer starts
8-byte aligned, and every BF16 value is its F32 value rounded to nearest even.
Independent of meshloom (tests/data/safetensors_test.cpp runs it).

usage: check_safetensors.py F32_FILE BF16_FILE; exit 0 when all holds.
"""
import json
import sys

import numpy as np


def load(path, dtype):
    raw = open(path, "rb").read()
    n = int.from_bytes(raw[:8], "little")
    assert (8 + n) % 8 == 0, f"{path}: buffer not 8-byte aligned"
    header = json.loads(raw[8:8 + n])
    buf = raw[8 + n:]
    header.pop("__metadata__", None)
    out, end = {}, 0
    for name, e in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        assert e["dtype"] == dtype, f"{path}: {name} is {e['dtype']}"
        b, f = e["data_offsets"]
        assert b == end, f"{path}: {name} starts at {b}, not {end}"
        end = f
        np_type = "<f4" if dtype == "F32" else "<u2"
        out[name] = np.frombuffer(buf[b:f], np_type).reshape(e["shape"])
    assert end == len(buf), f"{path}: tensors cover {end} of {len(buf)} bytes"
    return out


def main():
    f32 = load(sys.argv[1], "F32")
    bf16 = load(sys.argv[2], "BF16")
    assert f32.keys() == bf16.keys(), "different tensors"
    for name, x in f32.items():
        u = x.view(np.uint32).astype(np.uint64)
        want = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
        assert np.array_equal(want, bf16[name]), f"{name}: BF16 is not F32 rounded to nearest even"
    print(f"check_safetensors: {len(f32)} tensors agree")


if __name__ == "__main__":
    main()
