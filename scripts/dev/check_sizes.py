#!/usr/bin/python3
"""Check that code stays in small pieces: no source file over 600 lines and no
function over 120, except device kernels (kernels/device/**/*.cu, *.cuh), whose
unrolled tiles read best whole.

Functions are found by their braces: a `{` that ends a line whose code closes
a parameter list (not if/for/while/switch/catch, not a class or namespace)
opens one, and the matching `}` closes it. Lambdas and local classes count as
part of the function around them.

Usage: check_sizes.py [FOLDER...]   (default: lib app kernels scripts/bench/src fuzz tests)
Prints each piece over its limit as FILE:LINE: what; exits 1 if there is one.
"""
import os
import re
import subprocess
import sys

MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 120
SOURCES = (".cpp", ".hpp", ".h", ".cu", ".cuh")
OPENS_FUNCTION = re.compile(
    r"\)\s*(const\s*)?(noexcept\s*)?(override\s*)?(->\s*[\w:<>,*& ]+\s*)?(:\s*.*)?\{\s*$")
NOT_A_FUNCTION = re.compile(r"^\s*(\}\s*)?(if|for|while|switch|catch|else|do)\b|^\s*[\w:]*\s*\[")


def device_kernel(path):
    return path.startswith("kernels/device/") and path.endswith((".cu", ".cuh"))


def code_of(line):
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    line = re.sub(r"'(\\.|[^'\\])*'", "''", line)
    return re.sub(r"//.*", "", line)


def long_functions(lines):
    depth, start, start_depth, name = 0, None, 0, ""
    for number, line in enumerate(lines, 1):
        code = code_of(line)
        for ch in code:
            if ch == "{":
                depth += 1
                if (start is None and code.rstrip().endswith("{") and OPENS_FUNCTION.search(code)
                        and not NOT_A_FUNCTION.search(code)):
                    start, start_depth, name = number, depth, code.strip()
            elif ch == "}":
                if start is not None and depth == start_depth:
                    if number - start + 1 > MAX_FUNCTION_LINES:
                        yield start, number - start + 1, name
                    start = None
                depth -= 1


def main():
    folders = sys.argv[1:] or ["lib", "app", "kernels", "scripts/bench/src", "fuzz", "tests"]
    files = subprocess.check_output(["git", "ls-files", *folders], text=True).split()
    problems = []
    for path in files:
        if not path.endswith(SOURCES) or device_kernel(path) or not os.path.exists(path):
            continue
        lines = open(path, encoding="utf-8", errors="replace").read().splitlines()
        if len(lines) > MAX_FILE_LINES:
            problems.append(f"{path}:1: {len(lines)} lines, more than {MAX_FILE_LINES}")
        for line, length, name in long_functions(lines):
            problems.append(f"{path}:{line}: a function of {length} lines, more than "
                            f"{MAX_FUNCTION_LINES}: {name[:70]}")
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
