#!/usr/bin/python3
"""Check the repository's Markdown links: every relative `[text](target)` and
`![alt](target)` in a tracked .md file must name a file or folder that exists,
and a `#anchor` must be a heading of that file (GitHub's anchors: lower case,
punctuation dropped, spaces as '-'). Web links are not followed.

Usage: check_links.py [FILE.md...]     (default: every tracked .md file)
Prints each broken link as FILE:LINE: target (why); exits 1 if there is one.
"""
import os
import re
import subprocess
import sys

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def slug(heading):
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)  # keeps letters, digits, '_', '-', ' '
    return s.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        seen, out, fenced = {}, set(), False
        for line in open(path, encoding="utf-8"):
            if FENCE.match(line):
                fenced = not fenced
            m = None if fenced else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if m:
                base = slug(m.group(1))
                n = seen.get(base, 0)
                seen[base] = n + 1
                out.add(base if n == 0 else f"{base}-{n}")
        cache[path] = out
    return cache[path]


def main():
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    os.chdir(root)
    files = sys.argv[1:] or subprocess.run(
        ["git", "ls-files", "*.md"], capture_output=True, text=True, check=True).stdout.split()
    bad = 0
    for md in files:
        fenced = False
        for n, line in enumerate(open(md, encoding="utf-8"), 1):
            if FENCE.match(line):
                fenced = not fenced
            if fenced:
                continue
            for target in LINK.findall(line):
                if re.match(r"^[a-z]+:", target):
                    continue
                path, _, anchor = target.partition("#")
                full = os.path.normpath(os.path.join(os.path.dirname(md), path)) if path else md
                why = None
                if not os.path.exists(full):
                    why = "no such file"
                elif anchor and full.endswith(".md") and anchor not in anchors(full):
                    why = f"no heading #{anchor} in {full}"
                if why:
                    print(f"{md}:{n}: {target} ({why})")
                    bad += 1
    print(f"check_links: {len(files)} files, {bad} broken link(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
