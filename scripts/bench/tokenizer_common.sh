# shellcheck shell=bash disable=SC2034  # variables for the sourcing script
# tokenizer_common.sh: what the tokenizer benchmarks share (bench_tokenizer.sh,
# bench_tokenizer_hf.sh; source it): PIN_CMD (taskset to the last core with
# PIN=1), the two corpora by name in CORPUS (Python 3.11's docs and standard
# library), field, and the machine's cpu and the UTC date for the CSV rows.
PIN_CMD=()
if [[ ${PIN:-0} == 1 ]] && command -v taskset >/dev/null; then PIN_CMD=(taskset -c "$(($(nproc) - 1))"); fi

declare -A CORPUS
CORPUS[python-docs]=$(find /usr/share/doc/python3.11/html/_sources -name '*.rst.txt' 2>/dev/null | sort)
CORPUS[python-stdlib]=$(ls /usr/lib/python3.11/*.py 2>/dev/null | sort)

# field NAME LINE: the value of NAME=... in a key=value line
field() { tr ' ' '\n' <<<"$2" | sed -n "s/^$1=//p"; }

cpu=$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1 | tr ',' ' ')
date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
