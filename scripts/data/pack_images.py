#!/usr/bin/python3
"""Packs images with captions into WebDataset shards (lib/data/webdataset.hpp).

  pack_images.py [--per-shard N] [--limit N] OUT_PREFIX INPUT...

INPUT: image files or folders of them (.jpg, .jpeg, .png, searched
recursively, in sorted path order). Each sample is KEY.EXT (the image's bytes,
unchanged), KEY.txt (the caption) and KEY.json ({"caption", "source"}), KEY
being the sample's number; shards are OUT_PREFIX-000000.tar, ... with N
samples each (1000 by default). The caption is NAME.txt beside the image if
there is one, else made from the folder and file names below the INPUT
folder: openclipart-png's "animals/birds/blue_jay_tom_01.png" becomes
"animals, birds: blue jay tom". Shards are reproducible: members in input order,
mtime 0, owner root.

Debian's python3 only (no PIL needed). Example with Debian's clip art:
  apt-get install -y openclipart-png
  scripts/data/pack_images.py data/clipart/shard /usr/share/openclipart/png
"""

import argparse
import io
import json
import os
import re
import sys
import tarfile

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png")


def find_images(inputs):
    """(path, root) pairs: the root is the INPUT folder a file was found in."""
    found = []
    for item in inputs:
        if os.path.isdir(item):
            for folder, dirs, files in os.walk(item):
                dirs.sort()
                for name in sorted(files):
                    if name.lower().endswith(IMAGE_EXTENSIONS):
                        found.append((os.path.join(folder, name), item))
        elif os.path.isfile(item):
            found.append((item, os.path.dirname(item)))
        else:
            sys.exit("pack_images.py: %s: no such file or folder" % item)
    return found


def words(name):
    """'blue_jay_tom_01' -> 'blue jay tom': separators to spaces, a trailing number dropped."""
    name = re.sub(r"[_\-.]+", " ", name).strip()
    return re.sub(r"\s+\d+$", "", name)


def caption_for(path, root):
    side = os.path.splitext(path)[0] + ".txt"
    if os.path.isfile(side):
        with open(side, encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    rel = os.path.relpath(path, root)
    folders = [words(p) for p in os.path.dirname(rel).split(os.sep) if p]
    stem = words(os.path.splitext(os.path.basename(rel))[0])
    return (", ".join(folders) + ": " + stem) if folders else stem


def add_member(tar, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = 0
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out_prefix")
    parser.add_argument("inputs", nargs="+")
    parser.add_argument("--per-shard", type=int, default=1000)
    parser.add_argument("--limit", type=int, default=0, help="at most this many samples")
    args = parser.parse_args()
    if args.per_shard < 1:
        sys.exit("pack_images.py: --per-shard must be at least 1")
    images = find_images(args.inputs)
    if args.limit > 0:
        images = images[:args.limit]
    if not images:
        sys.exit("pack_images.py: no .jpg, .jpeg or .png found")
    out_dir = os.path.dirname(args.out_prefix)
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
    shards = []
    tar = None
    for i, (path, root) in enumerate(images):
        if i % args.per_shard == 0:
            if tar:
                tar.close()
            shards.append("%s-%06d.tar" % (args.out_prefix, len(shards)))
            tar = tarfile.open(shards[-1], "w", format=tarfile.PAX_FORMAT)
        key = "%09d" % i
        ext = os.path.splitext(path)[1].lower()
        caption = caption_for(path, root)
        with open(path, "rb") as f:
            add_member(tar, key + ext, f.read())
        add_member(tar, key + ".txt", caption.encode("utf-8"))
        meta = {"caption": caption, "source": os.path.relpath(path, root)}
        add_member(tar, key + ".json", json.dumps(meta, ensure_ascii=False).encode("utf-8"))
    tar.close()
    print("pack_images.py: %d samples in %d shards: %s ... %s" %
          (len(images), len(shards), shards[0], shards[-1]))


if __name__ == "__main__":
    main()
