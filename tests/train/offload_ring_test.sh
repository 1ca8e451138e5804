#!/usr/bin/env bash
# Offloaded pieces in rings, end to end on the CPU: with plan.offload a k-way
# piece may hold more than plan.capacity tokens (the capacity counts only its
# resident layers), and the two members of an odd-length sequence hold one
# token more or less; every member must still take its neighbour's block.
# Same loss and gradients as one trainer (1e-5).
#   offload_ring_test.sh MESHLOOM MPIEXEC
set -u
meshloom=$1 mpiexec=$2
# shellcheck source=tests/common/testlib.sh
source "$(dirname "$0")/../common/testlib.sh"
# shellcheck source=tests/train/invariance_cases.sh
source "$(dirname "$0")/invariance_cases.sh"
# Documents of 1000, 999, 901 and 950 bytes: samples of more than 800 tokens
# (4 layers at C = 400: two trainers only with offloading), odd and even.
mkdir -p "$dir/raw"
src=/usr/share/doc/python3.11/html/_sources/library/argparse.rst.txt
[[ -f $src ]] || fail "python3.11-doc missing"
for n in 1000 999 901 950; do head -c "$n" "$src" | tr '\n' ' ' >"$dir/raw/doc$n.txt"; done
"$meshloom" prepare --input "$dir/raw" --format text --tokenizer byte --out "$dir/docs" >/dev/null ||
  fail "prepare"
invariance_config cuda >"$dir/c.yaml"  # the 4-layer model (on the CPU here)
invariance_run ref 1 --set plan.capacity=4096 || { cat "$dir/ref.txt"; fail "reference run"; }
invariance_run off2 2 --set plan.capacity=400 --set plan.offload=true ||
  { cat "$dir/off2.txt"; fail "two trainers with offloaded rings"; }
invariance_compare /usr/bin/python3 "$root/scripts/data/compare_dumps.py" off2 1e-5 ||
  fail "offloaded rings differ from the one-trainer reference"
echo "offloaded rings match one trainer"
