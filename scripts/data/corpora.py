#!/usr/bin/python3
"""Turn the real text that scripts/setup.sh installs into JSON Lines, one
document per line ({"text": ...}), for `meshloom prepare`:

  bible     the King James Bible (Debian bible-kjv), one document per book
  fortunes  fortune cookies (Debian fortunes), one document per fortune

Usage: corpora.py bible|fortunes OUT.jsonl
"""
import glob
import json
import os
import re
import subprocess
import sys


def bible():
    text = subprocess.run(["bible", "gen1:1-rev22:21"], check=True, capture_output=True,
                          text=True).stdout
    book, lines = None, []
    for line in text.splitlines():
        m = re.match(r"^(\S.*) (\d+)$", line)
        if m and m.group(1) != book:
            if lines:
                yield "\n".join(lines).strip() + "\n"
            book, lines = m.group(1), []
        lines.append(line)
    if lines:
        yield "\n".join(lines).strip() + "\n"


def fortunes():
    for path in sorted(glob.glob("/usr/share/games/fortunes/*")):
        if path.endswith(".dat") or os.path.islink(path) or not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            for cookie in f.read().split("\n%\n"):
                if cookie.strip():
                    yield cookie.strip("%\n") + "\n"


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("bible", "fortunes"):
        sys.exit(__doc__)
    docs = {"bible": bible, "fortunes": fortunes}[sys.argv[1]]()
    n = 0
    with open(sys.argv[2], "w", encoding="utf-8") as out:
        for doc in docs:
            out.write(json.dumps({"text": doc}) + "\n")
            n += 1
    print(f"{sys.argv[2]}: {n} documents")


if __name__ == "__main__":
    main()
