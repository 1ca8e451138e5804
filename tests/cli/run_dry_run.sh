#!/usr/bin/env bash
# A good config passes a dry run at NP ranks: exit 0, the layout printed, the
# effective config saved into the run folder and equal to what was printed.
#   run_dry_run.sh MESHLOOM MPIEXEC CONFIG NP
set -u
meshloom=$1 mpiexec=$2 config=$3 np=$4
dir=$(mktemp -d)
out=$dir/out.txt
fail() { echo "FAIL: $*"; cat "$out"; rm -rf "$dir"; exit 1; }
config=$(realpath "$config")
dry_run() {
  (cd "$dir" && timeout 60 "$mpiexec" --oversubscribe --bind-to none -np "$np" \
    "$meshloom" train --config "$config" --set run.dir="$dir/run" --dry-run >"$out" 2>&1)
}
# The dry run opens the config's sources (paths relative to the working
# folder): first without them, then with small stand-ins prepared there.
dry_run && fail "a dry run without the sources passed"
grep -q "^meshloom: error: source '[a-z]*': cannot open" "$out" || fail "no message naming the missing source"
sources=$("$meshloom" config show --config "$config" | sed -n 's/^ *path: //p')
for s in $sources; do
  mkdir -p "$dir/$(dirname "$s")" "$dir/text"
  printf 'A stand-in document for %s.\n' "$s" >"$dir/text/$(basename "$s").txt"
  "$meshloom" prepare --input "$dir/text/$(basename "$s").txt" --format text --tokenizer byte \
    --out "$dir/$s" >/dev/null 2>&1 || fail "prepare $s"
done
dry_run
rc=$?
((rc == 0)) || fail "exit code $rc"
grep -q 'dry run OK' "$out" || fail "no 'dry run OK'"
grep -q "# layout: $np ranks" "$out" || fail "layout not printed for $np ranks"
grep -qE '^  trainer +[0-9]+' "$out" || fail "no trainer line in the layout"
[[ -f $dir/run/config.yaml ]] || fail "effective config not saved"
"$meshloom" config show --config "$dir/run/config.yaml" >"$dir/again.yaml" 2>&1 ||
  fail "saved config does not load: $(cat "$dir/again.yaml")"
cmp -s "$dir/run/config.yaml" "$dir/again.yaml" || fail "saved config is not a fixed point"
cat "$out"
rm -rf "$dir"
