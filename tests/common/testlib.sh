# Shared by the end-to-end test scripts (source it): a work folder removed on
# exit, fail(), and real text prepared as a small byte-level indexed dataset.

dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$dir"' EXIT
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

fail() { echo "FAIL: $*"; exit 1; }

# prepare_docs NAME GLOB: the Python library docs matching GLOB (installed by
# scripts/setup.sh) as $dir/NAME.bin/.idx, byte tokenizer.
prepare_docs() {
  mkdir -p "$dir/$1"
  cp /usr/share/doc/python3.11/html/_sources/library/$2.rst.txt "$dir/$1/" || fail "python3.11-doc missing"
  "$meshloom" prepare --input "$dir/$1" --format text --tokenizer byte --out "$dir/$1" >/dev/null ||
    fail "prepare $1"
}
