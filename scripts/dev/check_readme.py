#!/usr/bin/python3
"""Check README.md against the tree: at most 200 lines, and every repository
path it names (in `backticks`, in the folder map, or in parentheses such as
"(app/cmd_train.cpp, ...)") exists. Paths a run writes (runs/, build/) are
not checked.

Usage: check_readme.py [README.md]
Prints each problem as README.md:LINE: what; exits 1 if there is one.
"""
import os
import re
import sys

MAX_LINES = 200
TOP = ("app/", "lib/", "cuda/", "kernels/", "configs/", "scripts/", "tests/",
       "slurm/", "bench/", "docs/", "fuzz/", ".ci/")
PATH = re.compile(r"(?<![\w./-])((?:%s)[\w./-]*)" % "|".join(re.escape(t) for t in TOP))


def named_paths(line):
    for match in PATH.finditer(line):
        path = match.group(1).rstrip(".,;:")
        if "X" in os.path.basename(path):  # a pattern such as app/cmd_X.cpp
            continue
        yield path


def main():
    readme = sys.argv[1] if len(sys.argv) > 1 else "README.md"
    root = os.path.dirname(os.path.abspath(readme))
    lines = open(readme, encoding="utf-8").read().splitlines()
    problems = []
    if len(lines) > MAX_LINES:
        problems.append(f"{readme}:{len(lines)}: {len(lines)} lines, more than {MAX_LINES}")
    for number, line in enumerate(lines, 1):
        for path in named_paths(line):
            if not os.path.exists(os.path.join(root, path)):
                problems.append(f"{readme}:{number}: {path} does not exist")
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
