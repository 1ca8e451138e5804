#!/usr/bin/python3
"""Write the raw JSON Lines sources of scripts/bench/bench_data.sh (one document per
line, {"text": ...}) from real text installed by scripts/setup.sh:

  docs_other.jsonl   Python 3.11 docs sources (*.rst.txt) outside library/,
                     whatsnew/ and c-api/ (those three are read as text folders)
  stdlib_pkgs.jsonl  Python 3.11 standard library packages: every *.py below a
                     subfolder of /usr/lib/python3.11 (the top-level modules
                     are the prepared, indexed source)

The King James Bible and the fortunes come from scripts/data/corpora.py.

Usage: bench_data_corpora.py OUT_DIR
"""
import glob
import json
import os
import sys

DOCS = "/usr/share/doc/python3.11/html/_sources"
STDLIB = "/usr/lib/python3.11"
SPLIT_OUT = ("library", "whatsnew", "c-api")


def docs_other():
    for path in sorted(glob.glob(os.path.join(DOCS, "**", "*.rst.txt"), recursive=True)):
        top = os.path.relpath(path, DOCS).split(os.sep)[0]
        if top not in SPLIT_OUT:
            yield path


def stdlib_pkgs():
    for path in sorted(glob.glob(os.path.join(STDLIB, "*", "**", "*.py"), recursive=True)):
        if "site-packages" not in path and "dist-packages" not in path:
            yield path


def write(out, paths):
    n = size = 0
    with open(out, "w", encoding="utf-8") as f:
        for p in paths:
            with open(p, encoding="utf-8", errors="replace") as src:
                text = src.read()
            if not text:
                continue
            f.write(json.dumps({"text": text}) + "\n")
            n += 1
            size += len(text.encode("utf-8"))
    print(f"{out}: {n} documents, {size / 1e6:.1f} MB of text")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    write(os.path.join(out, "docs_other.jsonl"), docs_other())
    write(os.path.join(out, "stdlib_pkgs.jsonl"), stdlib_pkgs())


if __name__ == "__main__":
    main()
