#!/usr/bin/python3
"""Checks lib/image's patches against an independent decode with PIL.

pil_compare.py DUMP_PATCHES IMAGES_DIR

For every image in IMAGES_DIR and a few (max_side, patch) settings, PIL
decodes, composites alpha on black, resizes with Image.BILINEAR to the fitted
size and cuts patches by the definition in lib/image/patches.hpp; the values
must equal dump_patches' within 1/255 of the pixel range per channel. Exits 77
(skip) when PIL is missing. Pure Python besides PIL: no numpy needed.
"""
import array
import os
import subprocess
import sys
import tempfile

try:
    from PIL import Image
except ImportError:
    print("SKIP: /usr/bin/python3 has no PIL (Debian: python3-pil)")
    sys.exit(77)

SETTINGS = [(512, 16), (64, 16), (100, 14), (37, 8), (150, 16)]


def fit_size(w, h, max_side):
    long_side = max(w, h)
    if long_side <= max_side:
        return w, h
    return tuple(max(1, (s * max_side + long_side // 2) // long_side) for s in (w, h))


def pil_rgb(path):
    im = Image.open(path)
    im = im.convert("RGBA")  # palette, gray, tRNS: as libpng's expansion
    px = im.tobytes()
    out = bytearray(len(px) // 4 * 3)
    for i in range(len(px) // 4):
        a = px[4 * i + 3]
        for c in range(3):
            out[3 * i + c] = (px[4 * i + c] * a + 127) // 255
    return Image.frombytes("RGB", im.size, bytes(out))


def pil_patches(path, max_side, p):
    im = pil_rgb(path)
    size = fit_size(im.width, im.height, max_side)
    if size != im.size:
        im = im.resize(size, Image.BILINEAR)
    w, h = im.size
    px = im.tobytes()
    rows, cols = (h + p - 1) // p, (w + p - 1) // p
    values = []
    for r in range(rows):
        for c in range(cols):
            for y in range(p):
                for x in range(p):
                    px_x, px_y = c * p + x, r * p + y
                    if px_x >= w or px_y >= h:
                        values += [0.0, 0.0, 0.0]
                    else:
                        i = (px_y * w + px_x) * 3
                        values += [v / 127.5 - 1.0 for v in px[i:i + 3]]
    return rows, cols, values


def ours(tool, path, max_side, p, tmp):
    out = os.path.join(tmp, "patches")
    subprocess.run([tool, path, str(max_side), str(p), out], check=True)
    with open(out, "rb") as f:
        rows, cols, patch = (int(v) for v in f.readline().split())
        values = array.array("f")
        values.frombytes(f.read())
    return rows, cols, patch, values


def main():
    tool, folder = sys.argv[1], sys.argv[2]
    images = sorted(f for f in os.listdir(folder) if f.endswith((".jpg", ".png")))
    worst = 0.0
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in images:
            path = os.path.join(folder, name)
            for max_side, p in SETTINGS:
                rows, cols, patch, got = ours(tool, path, max_side, p, tmp)
                want_rows, want_cols, want = pil_patches(path, max_side, p)
                where = "%s max_side=%d patch=%d" % (name, max_side, p)
                if (rows, cols, patch) != (want_rows, want_cols, p) or len(got) != len(want):
                    print("FAIL %s: grid %dx%d p=%d, PIL %dx%d" % (where, rows, cols, patch,
                                                                  want_rows, want_cols))
                    failures += 1
                    continue
                # In pixel units (0..255): the normalized range 2 is 255 levels.
                diff = max((abs(a - b) * 127.5 for a, b in zip(got, want)), default=0.0)
                worst = max(worst, diff)
                status = "ok" if diff <= 1.0 + 1e-3 else "FAIL"
                failures += status == "FAIL"
                print("%s %s: %dx%d patches, max difference %.4f / 255" % (status, where, rows,
                                                                           cols, diff))
    print("max difference over all images: %.4f / 255 (allowed 1)" % worst)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
